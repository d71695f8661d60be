import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { StepRecord, TaskRecord } from '@sluice/db';
import { startTracing, type Tracing } from '@sluice/telemetry';
import { ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { headers } from '@nats-io/transport-node';
import { extractTraceContext } from '@sluice/bus';
import { createSpanRecorder, type SpanRecorder } from './span-recorder.js';
import { recordTaskStarted, runInStepSpan } from './step-span.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const task = {
  id: 'task-1',
  tenantId: 'acme',
  type: 'demo',
  traceParent: `00-${TRACE_ID}-b7ad6b7169203331-01`,
} as TaskRecord;
const step = { name: 'fetch', resource: 'tool:http', seq: 2, attempts: 1 } as StepRecord;

describe('runInStepSpan', () => {
  let tracing: Tracing;
  let recorder: SpanRecorder;
  before(() => {
    recorder = createSpanRecorder();
    tracing = startTracing({ serviceName: 'step-span-test', spanProcessors: [recorder] });
  });
  after(() => tracing.shutdown());

  it('runs the handler in a recording child span of the task’s trace', async () => {
    const seen = await runInStepSpan(task, step, (span) =>
      Promise.resolve({
        traceId: span.spanContext().traceId,
        spanId: span.spanContext().spanId,
        recording: span.isRecording(),
        active: trace.getActiveSpan()?.spanContext().spanId,
      }),
    );
    assert.equal(seen.traceId, TRACE_ID);
    assert.notEqual(seen.spanId, 'b7ad6b7169203331', 'a new span, child of the stored one');
    assert.equal(seen.recording, true);
    assert.equal(seen.active, seen.spanId, 'the step span is the active span');
  });

  it('is a child of the dispatch span its message names, else of the task’s span', async () => {
    const dispatchHeaders = headers();
    dispatchHeaders.set('traceparent', `00-${TRACE_ID}-00f067aa0ba902b7-01`);
    const fromMessage = await runInStepSpan(
      task,
      step,
      (span) => Promise.resolve(span.spanContext().spanId),
      extractTraceContext(dispatchHeaders, ROOT_CONTEXT),
    );
    const withoutHeaders = await runInStepSpan(
      task,
      step,
      (span) => Promise.resolve(span.spanContext().spanId),
      extractTraceContext(undefined, ROOT_CONTEXT),
    );
    const parentOf = async (spanId: string) =>
      (await recorder.waitFor((s) => s.spanContext().spanId === spanId)).parentSpanContext;
    assert.deepEqual(
      [(await parentOf(fromMessage))?.spanId, (await parentOf(fromMessage))?.traceId],
      ['00f067aa0ba902b7', TRACE_ID],
    );
    assert.equal((await parentOf(withoutHeaders))?.spanId, 'b7ad6b7169203331');
  });

  it('records the task’s start as a transition event of the step span', async () => {
    const spanId = await runInStepSpan(task, step, (span) => {
      recordTaskStarted(span, step);
      return Promise.resolve(span.spanContext().spanId);
    });
    const span = await recorder.waitFor((s) => s.spanContext().spanId === spanId);
    assert.deepEqual(
      span.events.map((e) => [e.name, e.attributes]),
      [
        [
          'sluice.task.transition',
          {
            'sluice.task.event': 'start',
            'sluice.task.status.from': 'queued',
            'sluice.task.status.to': 'running',
            'sluice.step': 'fetch',
          },
        ],
      ],
    );
  });

  it('starts a trace of its own for a task created without one', async () => {
    const traceId = await runInStepSpan({ ...task, traceParent: null }, step, (span) =>
      Promise.resolve(span.spanContext().traceId),
    );
    assert.notEqual(traceId, TRACE_ID);
  });

  it('returns what the handler returns and rethrows what it throws', async () => {
    assert.equal(await runInStepSpan(task, step, () => Promise.resolve(42)), 42);
    await assert.rejects(
      runInStepSpan(task, step, () => Promise.reject(new Error('boom'))),
      /boom/,
    );
  });

  it('rethrows what the handler throws when its shape breaks the span’s record of it', async () => {
    const withoutPrototype: unknown = Object.create(null);
    const unreadableStack = new Error('unreadable stack');
    Object.defineProperty(unreadableStack, 'stack', {
      get() {
        throw new Error('stack cannot be read');
      },
    });
    for (const thrown of [withoutPrototype, unreadableStack]) {
      await assert.rejects(
        runInStepSpan(task, step, () => Promise.reject(thrown as Error)),
        (error) => error === thrown,
      );
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { StepRecord, TaskRecord } from '@sluice/db';
import { startTracing, type Tracing } from '@sluice/telemetry';
import { trace } from '@opentelemetry/api';
import { runInStepSpan } from './step-span.js';

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
  before(() => {
    tracing = startTracing({ serviceName: 'step-span-test' });
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
});

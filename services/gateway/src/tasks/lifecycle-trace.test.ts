/**
 * `CreateTask` from a traced caller opens the task's span in the caller's trace, and a person's
 * lifecycle request lands in the task's own trace: `PauseTask` and `ResumeTask` over a
 * real gRPC connection (real Postgres and NATS) are `sluice.task.pause` / `sluice.task.resume` spans,
 * children of the traceparent stored on the task, linked to the request's RPC span, with the state
 * change as an event.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import type { TracingOptions } from '@sluice/telemetry';
import { startTestServer, type TestServer } from './test-server.js';

type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];
type RecordedSpan = Parameters<SpanProcessor['onEnd']>[0];

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CREATE_SPAN_ID = '00f067aa0ba902b7';
const manifest: TaskTypeManifest = {
  name: 'traced',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe("lifecycle requests in the task's trace", () => {
  const ended: RecordedSpan[] = [];
  const recorder: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => void ended.push(span),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  let server: TestServer;
  let handle: TestServer['handle'];

  before(async () => {
    server = await startTestServer({
      name: 'lifecycle-trace',
      manifest,
      spanProcessors: [recorder],
    });
    handle = server.handle;
  });
  after(async () => {
    await server?.close();
  });

  /** Calls a TaskService method, in the trace of `traceparent` when given. */
  const rpc = (name: string, request: object, traceparent?: string) =>
    server.rpc(name, request, traceparent === undefined ? {} : { traceparent });
  const call = async (name: string, taskId: string): Promise<grpc.status> =>
    (await rpc(name, { task_id: taskId })).code;
  const only = (name: string): RecordedSpan => {
    const matching = ended.filter((span) => span.name === name);
    assert.equal(matching.length, 1, `spans named ${name}: ${ended.map((s) => s.name).join(', ')}`);
    return matching[0] as RecordedSpan;
  };

  it("CreateTask continues a traced caller's trace, which the task keeps", async () => {
    ended.length = 0;
    const callerSpanId = '1111111111111111';
    const { code, response } = await rpc(
      'CreateTask',
      { type: 'traced', priority: 'PRIORITY_P2', input: '{}', idempotency_key: '' },
      `00-${TRACE_ID}-${callerSpanId}-01`,
    );
    assert.equal(code, grpc.status.OK);
    const task = (response as { task: { task_id: string; trace_id: string } }).task;
    assert.equal(task.trace_id, TRACE_ID);
    const request = only('sluice.v1.TaskService/CreateTask');
    const create = only('sluice.task.create');
    assert.equal(request.parentSpanContext?.spanId, callerSpanId);
    assert.equal(create.spanContext().traceId, TRACE_ID);
    assert.equal(create.parentSpanContext?.spanId, request.spanContext().spanId);
    assert.equal(create.attributes['sluice.task.id'], task.task_id);
    const [row] = await handle.sql<{ trace_parent: string }[]>`
      select trace_parent from tasks where id = ${task.task_id}`;
    assert.equal(row?.trace_parent, `00-${TRACE_ID}-${create.spanContext().spanId}-01`);
    assert.deepEqual(
      create.events.map((event) => [event.name, event.attributes]),
      [
        [
          'sluice.task.transition',
          { 'sluice.task.event': 'create', 'sluice.task.status.to': 'queued' },
        ],
      ],
    );
  });

  it('pause and resume are spans continued from the stored traceparent', async () => {
    ended.length = 0;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
      traceParent: `00-${TRACE_ID}-${CREATE_SPAN_ID}-01`,
      traceId: TRACE_ID,
    });
    assert.equal(await call('PauseTask', task.id), grpc.status.OK);
    assert.equal(await call('ResumeTask', task.id), grpc.status.OK);

    for (const [action, from, to] of [
      ['pause', 'queued', 'paused'],
      ['resume', 'paused', 'queued'],
    ] as const) {
      const span = only(`sluice.task.${action}`);
      assert.equal(span.spanContext().traceId, TRACE_ID);
      assert.equal(span.parentSpanContext?.spanId, CREATE_SPAN_ID);
      assert.equal(span.attributes['sluice.task.id'], task.id);
      const rpc = only(`sluice.v1.TaskService/${action === 'pause' ? 'PauseTask' : 'ResumeTask'}`);
      assert.notEqual(rpc.spanContext().traceId, TRACE_ID, "the request is in the caller's trace");
      assert.deepEqual(
        span.links.map((link) => link.context.spanId),
        [rpc.spanContext().spanId],
        'linked to the request',
      );
      const events = span.events.filter((event) => event.name === 'sluice.task.transition');
      assert.deepEqual(
        events.map((event) => event.attributes),
        [
          {
            'sluice.task.event': action,
            'sluice.task.status.from': from,
            'sluice.task.status.to': to,
          },
        ],
      );
    }
  });
});

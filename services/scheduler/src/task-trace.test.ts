/**
 * The scheduler's spans in a task's trace, against the real Postgres and NATS: a dispatch is a
 * `send` PRODUCER span, child of the task's stored traceparent, whose context the message's headers
 * carry; an applied failure with attempts left, the timer that ends its backoff and a settled pause
 * are spans continued from the same traceparent, with the retry and each state change as events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog, ensureTopology } from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import type { SerializedStepError } from '@sluice/core';
import {
  createTask,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import {
  SpanKind,
  createLogger,
  createMetrics,
  startTracing,
  type Tracing,
  type TracingOptions,
} from '@sluice/telemetry';
import { dispatchBatch } from './dispatcher.js';
import { applyOutcomeBatch } from './outcome-applier.js';
import { settleBatch } from './settler.js';
import { fireTimerBatch } from './timer-firer.js';

type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];
type RecordedSpan = Parameters<SpanProcessor['onEnd']>[0];

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
/** The span id of the task's create span, as the gateway stores it. */
const CREATE_SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${CREATE_SPAN_ID}-01`;

const manifest: TaskTypeManifest = {
  name: 'traced',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 3 }],
};
const serverError: SerializedStepError = {
  errorClass: 'external_5xx',
  message: 'HTTP 503',
  retryable: true,
};
const log = createLogger({ service: 'task-trace-test', level: 'silent' });

describe("the scheduler's spans in a task's trace", () => {
  const ended: RecordedSpan[] = [];
  const recorder: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => void ended.push(span),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  let tracing: Tracing;
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const prefix = uniquePrefix('task-trace');
  const catalog = createBusCatalog(prefix);
  const common = () => ({ db: handle.db, log, metrics: createMetrics(), batchSize: 10 });

  before(async () => {
    tracing = startTracing({ serviceName: 'scheduler-test', env: {}, spanProcessors: [recorder] });
    database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
    handle = openDatabase(database.url, { max: 4 });
    await createTenant(handle.db, { id: 'acme' });
    await registerTaskType(handle.db, manifest);
    nc = await connectNats({ url: natsUrl(), name: 'task-trace-test' });
    jsm = await jetstreamManager(nc);
    await ensureTopology(jsm, catalog);
  });
  after(async () => {
    await deletePrefixResources(natsUrl(), prefix);
    if (nc) await closeNats(nc);
    await handle?.close();
    await database?.drop();
    await tracing?.shutdown();
  });

  const only = (name: string): RecordedSpan => {
    const matching = ended.filter((span) => span.name === name);
    assert.equal(matching.length, 1, `spans named ${name}: ${ended.map((s) => s.name).join(', ')}`);
    return matching[0] as RecordedSpan;
  };
  const assertInTaskTrace = (span: RecordedSpan) => {
    assert.equal(span.spanContext().traceId, TRACE_ID);
    assert.equal(span.parentSpanContext?.spanId, CREATE_SPAN_ID);
  };
  const transitions = (span: RecordedSpan) =>
    span.events
      .filter((event) => event.name === 'sluice.task.transition')
      .map((event) => event.attributes ?? {});

  it('dispatch, retry, backoff: one trace, the send context in the message headers', async () => {
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 1,
      input: {},
      traceParent: TRACEPARENT,
      traceId: TRACE_ID,
    });

    await dispatchBatch({ ...common(), js: jetstream(nc), catalog });
    const subject = catalog.subjects.step('llm', 1);
    const send = only(`send ${subject}`);
    assertInTaskTrace(send);
    assert.equal(send.kind, SpanKind.PRODUCER);
    assert.equal(send.attributes['messaging.system'], 'nats');
    assert.equal(send.attributes['messaging.destination.name'], subject);
    assert.equal(send.attributes['messaging.operation.type'], 'send');
    assert.equal(send.attributes['sluice.task.id'], task.id);
    const seq = send.attributes['sluice.jetstream.sequence'];
    assert.equal(typeof seq, 'number');
    const stored = await jsm.streams.getMessage(catalog.streams.steps, { seq: seq as number });
    assert.equal(
      stored?.header.get('traceparent'),
      `00-${TRACE_ID}-${send.spanContext().spanId}-01`,
      "the message carries the send span's context",
    );

    // What the executor would leave: the task running, the attempt failed with an error worth
    // retrying.
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
    await handle.sql`
      update task_steps
      set status = 'failed', attempts = 1, finished_at = now(),
          outcome = ${JSON.stringify({ type: 'failed', error: serverError })}::jsonb
      where task_id = ${task.id}`;
    await applyOutcomeBatch({
      ...common(),
      onStepsReady: () => undefined,
      abortRunningSteps: () => undefined,
    });
    const applied = only('sluice.scheduler.apply_outcome');
    assertInTaskTrace(applied);
    assert.equal(applied.attributes['sluice.outcome.type'], 'failed');
    assert.equal(applied.attributes['error.type'], 'external_5xx');
    const retry = applied.events.find((event) => event.name === 'sluice.step.retry_scheduled');
    assert.ok(retry, 'the retry is an event');
    assert.equal(retry.attributes?.['sluice.step.attempt'], 1);
    assert.equal(retry.attributes?.['error.type'], 'external_5xx');
    assert.equal(retry.attributes?.['sluice.step'], 'call');
    assert.match(String(retry.attributes?.['sluice.retry.next_attempt_at']), /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(transitions(applied), [
      {
        'sluice.task.event': 'fail_retryable',
        'sluice.task.status.from': 'running',
        'sluice.task.status.to': 'failed_retryable',
        'sluice.step': 'call',
        'error.type': 'external_5xx',
      },
    ]);

    // The backoff is over: its durable timer queues the task again, in the same trace.
    await handle.sql`update task_timers set due_at = now() - interval '1 second'
                     where task_id = ${task.id}`;
    await fireTimerBatch({ ...common(), onStepsReady: () => undefined });
    const fired = only('sluice.scheduler.fire_timer');
    assertInTaskTrace(fired);
    assert.equal(fired.attributes['sluice.timer.kind'], 'retry_backoff');
    assert.deepEqual(transitions(fired), [
      {
        'sluice.task.event': 'backoff_due',
        'sluice.task.status.from': 'failed_retryable',
        'sluice.task.status.to': 'queued',
      },
    ]);
  });

  it('a settled pause is a settle span with its transition', async () => {
    ended.length = 0;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
      traceParent: TRACEPARENT,
      traceId: TRACE_ID,
    });
    // Running with a pause requested and nothing in flight: the settler pauses it.
    await handle.sql`update tasks set status = 'running', pause_requested = true, started_at = now()
                     where id = ${task.id}`;
    await settleBatch(common());
    const settle = only('sluice.scheduler.settle');
    assertInTaskTrace(settle);
    assert.equal(settle.attributes['sluice.task.id'], task.id);
    assert.deepEqual(transitions(settle), [
      {
        'sluice.task.event': 'pause_completed',
        'sluice.task.status.from': 'running',
        'sluice.task.status.to': 'paused',
      },
    ]);
  });
});

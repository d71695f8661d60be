/**
 * The settler against the real Postgres, for a fan-out whose one branch waits out its retry
 * backoff: while a sibling runs the task stays `running` (the retry is a fact); once nothing else
 * runs, the task shows `failed_retryable` with the error and the next attempt, and the backoff
 * timer queues it again. The rows stand for what dispatch and executors would have left; the
 * applier, settler and timer firer under test are the real ones.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  claimReadySteps,
  createTask,
  createTenant,
  listTaskEvents,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { applyOutcomeBatch } from './outcome-applier.js';
import { settleBatch } from './settler.js';
import { fireTimerBatch } from './timer-firer.js';

const manifest: TaskTypeManifest = {
  name: 'fan-out-retry',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'split',
  steps: [
    { name: 'split', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 },
    { name: 'part', resource: 'llm', timeoutMs: 1_000, maxAttempts: 5 },
    { name: 'merge', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 },
  ],
};
const log = createLogger({ service: 'settler-test', level: 'silent' });

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, manifest);
});

after(async () => {
  await handle?.close();
  await database?.drop();
});

async function applyAll(): Promise<void> {
  const deps = {
    db: handle.db,
    log,
    metrics: createMetrics(),
    batchSize: 10,
    onStepsReady: () => undefined,
    abortRunningSteps: () => undefined,
  };
  while (await applyOutcomeBatch(deps));
}

/** Settles what waits; resolves with how many of the batches armed a timer. */
async function settleAll(): Promise<number> {
  let armed = 0;
  const deps = { db: handle.db, log, batchSize: 10, onTimersArmed: () => void (armed += 1) };
  while ((await settleBatch(deps)).more);
  return armed;
}

/** Leaves `outcome` recorded on the step, as an executor does when the step ends. */
async function record(taskId: string, seq: number, outcome: object): Promise<void> {
  const status = 'type' in outcome && outcome.type === 'failed' ? 'failed' : 'succeeded';
  await handle.sql`
    update task_steps
    set status = ${status}, attempts = attempts + 1, finished_at = now(),
        outcome = ${JSON.stringify(outcome)}::jsonb, outcome_applied_at = null
    where task_id = ${taskId} and seq = ${seq}`;
}

async function task(taskId: string) {
  const [row] = await handle.sql<
    { status: string; error: { errorClass: string; message: string } | null }[]
  >`select status, error from tasks where id = ${taskId}`;
  assert.ok(row);
  return row;
}

describe('settler: a fan-out branch waiting out its backoff', () => {
  it('keeps the task running while a sibling runs, then shows failed_retryable until the retry is due', async () => {
    const { task: created } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const taskId = created.id;
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${taskId}`;
    await record(taskId, 1, {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'part', input: { n: 1 } },
        { step: 'part', input: { n: 2 } },
      ],
      join: 'merge',
    });
    await applyAll();
    const branches = await handle.sql<{ seq: number }[]>`
      select seq from task_steps where task_id = ${taskId} and fan_out_of = 1 order by branch_index`;
    const [failing, sibling] = branches.map((b) => b.seq);
    assert.ok(failing !== undefined && sibling !== undefined, 'two branches were created');

    // One branch fails with a 5xx while its sibling runs.
    await handle.sql`update task_steps set status = 'running' where task_id = ${taskId} and seq = ${sibling}`;
    await record(taskId, failing, {
      type: 'failed',
      error: { errorClass: 'external_5xx', message: 'HTTP 503', retryable: true },
    });
    await applyAll();
    // Full jitter may pick a backoff of a few ms; this test needs the wait to still be ahead.
    await handle.sql`
      update task_steps set due_at = now() + interval '1 minute'
      where task_id = ${taskId} and seq = ${failing} and status = 'ready'`;
    await settleAll();
    assert.equal((await task(taskId)).status, 'running', 'a sibling still runs');

    // The sibling finishes: nothing runs but the branch waiting for its retry.
    await record(taskId, sibling, { type: 'complete', output: { n: 2 } });
    await applyAll();
    assert.equal(await settleAll(), 1, 'the backoff timer armed: the timer loop is woken');
    const waiting = await task(taskId);
    assert.equal(waiting.status, 'failed_retryable');
    assert.equal(waiting.error?.errorClass, 'external_5xx');
    assert.equal(waiting.error?.message, 'HTTP 503');
    const [step] = await handle.sql<{ due_at: string }[]>`
      select due_at from task_steps where task_id = ${taskId} and seq = ${failing}`;
    const timers = await handle.sql<{ due_at: string }[]>`
      select due_at from task_timers where task_id = ${taskId} and kind = 'retry_backoff' and done_at is null`;
    assert.equal(timers.length, 1, 'one backoff timer');
    assert.ok(step && timers[0]);
    const dueAt = new Date(step.due_at);
    assert.equal(new Date(timers[0].due_at).getTime(), dueAt.getTime(), 'due with the branch');
    const [last] = (await listTaskEvents(handle.db, taskId, 0)).slice(-1);
    assert.equal(last?.type, 'fail_retryable');
    assert.equal(last?.data?.['next_attempt_at'], dueAt.toISOString());

    assert.equal(await settleAll(), 0);
    assert.equal(
      (await listTaskEvents(handle.db, taskId, 0)).filter((e) => e.type === 'fail_retryable')
        .length,
      1,
      'settling again changes nothing',
    );

    // Before the backoff ends the timer firer says when it does, firing nothing.
    const early = await fireTimerBatch({
      db: handle.db,
      log,
      batchSize: 10,
      onStepsReady: () => {},
    });
    assert.equal(early.idle, true);
    assert.equal(early.handled, 0);
    const inMs = dueAt.getTime() - Date.now();
    assert.ok(
      early.dueInMs !== undefined && Math.abs(early.dueInMs - inMs) < 5_000,
      String(early.dueInMs),
    );
    assert.equal((await task(taskId)).status, 'failed_retryable');

    // The backoff ends: the task is queued again and its branch is dispatched.
    await handle.sql`update task_steps set due_at = now() where task_id = ${taskId} and seq = ${failing}`;
    await handle.sql`update task_timers set due_at = now() where task_id = ${taskId}`;
    const fired = await fireTimerBatch({
      db: handle.db,
      log,
      batchSize: 10,
      onStepsReady: () => {},
    });
    assert.deepEqual(fired, { more: false, handled: 1, idle: false });
    assert.equal((await task(taskId)).status, 'queued');
    const claimed = await handle.db.transaction((tx) => claimReadySteps(tx, 10));
    assert.deepEqual(
      claimed.map((c) => [c.taskId, c.seq]),
      [[taskId, failing]],
    );
  });
});

describe('settler: a running task whose cancel was requested', () => {
  it('ends it cancelled once nothing runs, still naming the step it was stopped at (a retry runs it first)', async () => {
    const { task: created } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const taskId = created.id;
    await handle.sql`
      update tasks set status = 'running', started_at = now(), current_step = 'split',
        cancel_requested = true
      where id = ${taskId}`;
    // The running step was stopped by its abort.
    await record(taskId, 1, { type: 'cancelled' });
    await handle.sql`update task_steps set status = 'cancelled' where task_id = ${taskId} and seq = 1`;
    await applyAll();
    await settleAll();
    const [row] = await handle.sql<{ status: string; current_step: string | null }[]>`
      select status, current_step from tasks where id = ${taskId}`;
    assert.deepEqual(row, { status: 'cancelled', current_step: 'split' });
  });
});

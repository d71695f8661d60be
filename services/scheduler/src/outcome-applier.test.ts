/**
 * The outcome applier's dead-letter path against the real Postgres: a failed step whose attempts
 * ran out writes its dead letter and fails the task (reason `dead_letter`) in one transaction and
 * counts it; a step with attempts left, or an error that is never retried, writes no letter; a step
 * another path failed with a dead letter (the advisory worker, the reconciler's dispatch cap) fails
 * its task with reason `dead_letter` too, naming that letter.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SerializedStepError, StepOutcome } from '@sluice/core';
import {
  applyTransition,
  createTask,
  createTenant,
  deadLettersOfTask,
  insertDeadLetter,
  listTaskEvents,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  rerunUnfinishedSteps,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import {
  createTestDatabase,
  migratedTemplate,
  startTurnCounter,
  type TestDatabase,
} from '@sluice/db/testing';
import { createLogger, createMetrics, type Metrics } from '@sluice/telemetry';
import { applyOutcomeBatch } from './outcome-applier.js';
import { settleBatch } from './settler.js';

const MAX_ATTEMPTS = 3;
const manifest: TaskTypeManifest = {
  name: 'flaky',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: MAX_ATTEMPTS }],
};
const serverError: SerializedStepError = {
  errorClass: 'external_5xx',
  message: 'HTTP 503',
  retryable: true,
};

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

/** A running task whose only step ran `attempts` times, ended `status` and recorded `outcome`. */
async function taskWithOutcome(
  status: 'failed' | 'succeeded',
  attempts: number,
  outcome: StepOutcome,
): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  // Only the applier is under test: the rows say what dispatch and executor would have left.
  await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
  await handle.sql`
    update task_steps
    set status = ${status}, attempts = ${attempts}, finished_at = now(),
        outcome = ${JSON.stringify(outcome)}::jsonb
    where task_id = ${task.id}`;
  return task.id;
}

/** A running task whose only step ran `attempts` times and recorded a failure; its id. */
function failedTask(attempts: number, error: SerializedStepError): Promise<string> {
  return taskWithOutcome('failed', attempts, { type: 'failed', error });
}

/** Applies every recorded outcome with `metrics`; resolves with how many passes armed timers. */
async function applyAll(metrics: Metrics): Promise<number> {
  let armed = 0;
  const deps = {
    db: handle.db,
    log: createLogger({ service: 'outcome-applier-test', level: 'silent' }),
    metrics,
    batchSize: 10,
    onStepsReady: () => undefined,
    onTimersArmed: () => void (armed += 1),
    abortRunningSteps: () => undefined,
  };
  while (await applyOutcomeBatch(deps));
  return armed;
}

async function deadLetterCount(metrics: Metrics): Promise<number> {
  const metric = await metrics.deadLetterCount.get();
  return metric.values.find((v) => v.labels['reason'] === 'attempts_exhausted')?.value ?? 0;
}

async function statusOf(taskId: string): Promise<string | undefined> {
  const [row] = await handle.sql<
    { status: string }[]
  >`select status from tasks where id = ${taskId}`;
  return row?.status;
}

describe('outcome applier: dead letters', () => {
  it('writes a dead letter and fails the task with reason dead_letter when attempts run out', async () => {
    const metrics = createMetrics();
    const taskId = await failedTask(MAX_ATTEMPTS, serverError);
    await applyAll(metrics);

    assert.equal(await statusOf(taskId), 'failed_terminal');
    const letters = await deadLettersOfTask(handle.db, taskId);
    assert.equal(letters.length, 1);
    const [letter] = letters;
    assert.equal(letter?.reason, 'attempts_exhausted');
    assert.equal(letter?.step, 'call');
    assert.equal(letter?.stepSeq, 1);
    assert.equal(letter?.attempts, MAX_ATTEMPTS);
    assert.deepEqual(letter?.error, serverError);
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.type, 'fail_terminal');
    assert.deepEqual(last?.data, {
      error_class: 'external_5xx',
      message: 'HTTP 503',
      attempts: MAX_ATTEMPTS,
      reason: 'dead_letter',
      dead_letter_id: letter?.id ?? '',
      dead_letter_reason: 'attempts_exhausted',
    });
    assert.equal(await deadLetterCount(metrics), 1, 'counted once');
  });

  it('writes no letter while attempts are left', async () => {
    const metrics = createMetrics();
    const taskId = await failedTask(1, serverError);
    assert.equal(await applyAll(metrics), 1, 'its backoff timer armed: the timer loop is woken');
    assert.equal(await statusOf(taskId), 'failed_retryable');
    assert.deepEqual(await deadLettersOfTask(handle.db, taskId), []);
    assert.equal(await deadLetterCount(metrics), 0);
  });

  it('fails an error that is never retried without a letter', async () => {
    const metrics = createMetrics();
    const taskId = await failedTask(1, {
      errorClass: 'permission_denied',
      message: 'HTTP 403',
      retryable: false,
    });
    assert.equal(await applyAll(metrics), 0, 'no timer armed');
    assert.equal(await statusOf(taskId), 'failed_terminal');
    assert.deepEqual(await deadLettersOfTask(handle.db, taskId), []);
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.data?.['reason'], 'not_retryable');
    assert.equal(await deadLetterCount(metrics), 0);
  });

  it('fails with reason dead_letter a step another path dead-lettered', async () => {
    const metrics = createMetrics();
    const poison: SerializedStepError = {
      errorClass: 'unknown',
      message: 'step message delivered 2 times without an outcome',
      retryable: false,
    };
    const taskId = await failedTask(1, poison);
    // What the advisory worker writes with the failed outcome, in its own transaction.
    const letterId = await insertDeadLetter(handle.db, {
      taskId,
      tenantId: 'acme',
      step: 'call',
      stepSeq: 1,
      reason: 'max_deliveries',
      error: poison,
      attempts: 2,
      streamSeq: 7,
    });
    await applyAll(metrics);

    assert.equal(await statusOf(taskId), 'failed_terminal');
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.deepEqual(last?.data, {
      error_class: 'unknown',
      message: poison.message,
      attempts: 1,
      reason: 'dead_letter',
      dead_letter_id: letterId,
      dead_letter_reason: 'max_deliveries',
    });
    assert.equal((await deadLettersOfTask(handle.db, taskId)).length, 1, 'no second letter');
    assert.equal(await deadLetterCount(metrics), 0, 'counted by the path that wrote it');
  });
});

describe('outcome applier: the settle question', () => {
  it('tells whether tasks wait to be settled, counting its own outcomes as applied', async () => {
    const answers: boolean[] = [];
    const deps = {
      db: handle.db,
      log: createLogger({ service: 'outcome-applier-test', level: 'silent' }),
      metrics: createMetrics(),
      batchSize: 10,
      onStepsReady: () => undefined,
      abortRunningSteps: () => undefined,
      onSettleChecked: (due: boolean) => answers.push(due),
    };
    await taskWithOutcome('succeeded', 1, { type: 'complete', output: {} });
    while (await applyOutcomeBatch(deps));
    assert.deepEqual(answers, [false], 'a completed task leaves nothing to settle');

    // A cancel was requested while the task's only step ran; the step ended cancelled. Once its
    // outcome is applied nothing of the task is in flight: the settler must cancel it.
    const cancelled = await taskWithOutcome('succeeded', 1, { type: 'cancelled' });
    await handle.sql`update tasks set cancel_requested = true where id = ${cancelled}`;
    await handle.sql`update task_steps set status = 'cancelled' where task_id = ${cancelled}`;
    while (await applyOutcomeBatch(deps));
    assert.deepEqual(answers, [false, true]);
    assert.deepEqual(await settleBatch({ db: handle.db, log: deps.log, batchSize: 10 }, true), {
      more: false,
      settled: 1,
    });
    assert.equal(await statusOf(cancelled), 'cancelled');
    assert.equal(await applyOutcomeBatch(deps), false, 'nothing left: an empty pass');
    assert.deepEqual(answers, [false, true], 'which asks nothing');
  });
});

describe('outcome applier: round trips', () => {
  /** A running task whose only step succeeded; its id. */
  const completedTask = () =>
    taskWithOutcome('succeeded', 1, { type: 'complete', output: { ok: true } });

  it('completes a batch of tasks in three: the locks with BEGIN, the completions with the marks and the settle question, COMMIT', async () => {
    const proxy = await startTurnCounter(database.url);
    const through = openDatabase(proxy.url, { max: 1 });
    const deps = {
      db: through.db,
      log: createLogger({ service: 'outcome-applier-test', level: 'silent' }),
      metrics: createMetrics(),
      batchSize: 10,
      onStepsReady: () => undefined,
      abortRunningSteps: () => undefined,
    };
    try {
      // Once to prepare the statements on the connection (the first use of a statement with
      // parameters asks Postgres for their types first; the marks' text varies with the count).
      await completedTask();
      await completedTask();
      while (await applyOutcomeBatch(deps));
      const taskIds = [await completedTask(), await completedTask()];
      proxy.reset();
      assert.equal(await applyOutcomeBatch(deps), false);
      assert.equal(proxy.turns(), 3);
      for (const taskId of taskIds) assert.equal(await statusOf(taskId), 'succeeded');
    } finally {
      await through.close();
      await proxy.close();
    }
  });
});

describe('outcome applier: a pause requested while the step ran', () => {
  it('pauses the task when its step fails with attempts left, the retry waiting in the queue', async () => {
    const log = createLogger({ service: 'outcome-applier-test', level: 'silent' });
    const taskId = await failedTask(1, serverError);
    await handle.sql`update tasks set pause_requested = true where id = ${taskId}`;
    await applyAll(createMetrics());
    await settleBatch({ db: handle.db, log, batchSize: 10 });

    // The step ended: the pause asked for takes effect (ARCHITECTURE.md: "→ paused when the
    // current step ends"), instead of the task backing off and running again unpaused.
    const [task] = await handle.sql<{ status: string; pause_requested: boolean }[]>`
      select status, pause_requested from tasks where id = ${taskId}`;
    assert.deepEqual(task, { status: 'paused', pause_requested: false });
    const [step] = await handle.sql<{ status: string }[]>`
      select status from task_steps where task_id = ${taskId}`;
    assert.equal(step?.status, 'ready', 'the retry waits in the queue for a resume');
    const types = (await listTaskEvents(handle.db, taskId, 0)).map((event) => event.type);
    assert.ok(!types.includes('fail_retryable'), types.join(', '));
  });
});

describe('outcome applier: a branch still running when its task was retried', () => {
  const fanOut: TaskTypeManifest = {
    name: 'fan',
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'split',
    steps: ['split', 'a', 'b', 'join'].map((name) => ({
      name,
      resource: 'llm',
      timeoutMs: 1_000,
      maxAttempts: 1,
    })),
  };

  /** Records `outcome` for step `seq` of the task, as its executor would. */
  async function record(taskId: string, seq: number, status: string, outcome: StepOutcome) {
    await handle.sql`
      update task_steps
      set status = ${status}, attempts = attempts + 1, finished_at = now(),
          outcome = ${JSON.stringify(outcome)}::jsonb
      where task_id = ${taskId} and seq = ${seq}`;
  }

  it('runs it again in the new attempt once it stops, so the fan-out can still join', async () => {
    await registerTaskType(handle.db, fanOut);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: fanOut,
      priority: 2,
      input: {},
    });
    const taskId = task.id;
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${taskId}`;
    await record(taskId, 1, 'succeeded', {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'a', input: {} },
        { step: 'b', input: {} },
      ],
      join: 'join',
    });
    await applyAll(createMetrics());
    // Both branches run; `a` fails for good, which fails the task while `b` still runs (its
    // executor is told to abort it).
    await handle.sql`update task_steps set status = 'running' where task_id = ${taskId} and seq in (2, 3)`;
    const denied = { errorClass: 'permission_denied', message: '403', retryable: false } as const;
    await record(taskId, 2, 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(taskId), 'failed_terminal');

    // RetryTask before `b` stopped: the retry runs `a` again; `b` is still running.
    await handle.db.transaction(async (tx) => {
      const retried = await applyTransition(tx, { taskId, event: { type: 'retry' } });
      assert.ok(retried.ok);
      assert.deepEqual(await rerunUnfinishedSteps(tx, { ...task, attempt: 2 }), ['a']);
    });
    // Then `b` stops, aborted: its outcome is `cancelled`.
    await record(taskId, 3, 'cancelled', { type: 'cancelled' });
    await applyAll(createMetrics());

    const ready = await handle.sql<{ name: string; task_attempt: number; key_seq: number }[]>`
      select name, task_attempt, key_seq from task_steps
      where task_id = ${taskId} and status = 'ready' order by seq`;
    // Without `b` in the new attempt the join never starts: the task would run forever.
    assert.deepEqual(
      ready.map((row) => ({ ...row })),
      [
        { name: 'a', task_attempt: 2, key_seq: 2 },
        { name: 'b', task_attempt: 2, key_seq: 3 },
      ],
    );
    // Both run again and complete their branches: the join starts.
    await handle.sql`update tasks set status = 'running' where id = ${taskId}`;
    await handle.sql`update task_steps set status = 'running' where task_id = ${taskId} and seq in (4, 5)`;
    await record(taskId, 4, 'succeeded', { type: 'complete', output: 'a' });
    await record(taskId, 5, 'succeeded', { type: 'complete', output: 'b' });
    await applyAll(createMetrics());
    const [join] = await handle.sql<{ status: string; input: unknown }[]>`
      select status, input from task_steps where task_id = ${taskId} and name = 'join'`;
    assert.deepEqual({ ...join }, { status: 'ready', input: { outputs: ['a', 'b'] } });
  });
});

describe('outcome applier: a cancel requested while the step ran', () => {
  const twoSteps: TaskTypeManifest = {
    name: 'two-steps',
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'first',
    steps: ['first', 'second', 'a', 'b', 'join'].map((name) => ({
      name,
      resource: 'llm',
      timeoutMs: 1_000,
      maxAttempts: 1,
    })),
  };
  const log = createLogger({ service: 'outcome-applier-test', level: 'silent' });

  /** A running task with a cancel requested whose first step ended with `outcome`. */
  async function cancelRequestedWith(outcome: StepOutcome) {
    await registerTaskType(handle.db, twoSteps);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: twoSteps,
      priority: 2,
      input: {},
    });
    await handle.sql`
      update tasks set status = 'running', started_at = now(), cancel_requested = true
      where id = ${task.id}`;
    await handle.sql`
      update task_steps
      set status = 'succeeded', attempts = 1, finished_at = now(),
          outcome = ${JSON.stringify(outcome)}::jsonb
      where task_id = ${task.id}`;
    return task;
  }

  /** Applies, settles, checks the task ended cancelled, and retries it as RetryTask does. */
  async function cancelThenRetry(task: Awaited<ReturnType<typeof cancelRequestedWith>>) {
    await applyAll(createMetrics());
    await settleBatch({ db: handle.db, log, batchSize: 10 });
    assert.equal(await statusOf(task.id), 'cancelled');
    await handle.db.transaction(async (tx) => {
      const retried = await applyTransition(tx, { taskId: task.id, event: { type: 'retry' } });
      assert.ok(retried.ok);
      await rerunUnfinishedSteps(tx, { ...task, attempt: 2 });
    });
    await settleBatch({ db: handle.db, log, batchSize: 10 });
  }

  async function readySteps(taskId: string): Promise<string[]> {
    const rows = await handle.sql<{ name: string }[]>`
      select name from task_steps where task_id = ${taskId} and status = 'ready' order by seq`;
    return rows.map((row) => row.name);
  }

  it('runs the next step the ended step asked for when the cancelled task is retried', async () => {
    const task = await cancelRequestedWith({ type: 'next', output: 1, step: 'second', input: {} });
    await cancelThenRetry(task);
    // The step that asked for `second` succeeded and is not run again; without `second` the
    // retried task has nothing to run and stays queued for ever.
    assert.equal(await statusOf(task.id), 'queued');
    assert.deepEqual(await readySteps(task.id), ['second']);
  });

  it('runs the join of a fan-out whose last branch completed when the cancelled task is retried', async () => {
    await registerTaskType(handle.db, twoSteps);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: twoSteps,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
    await handle.sql`
      update task_steps
      set status = 'succeeded', attempts = 1, finished_at = now(),
          outcome = ${JSON.stringify({
            type: 'fanOut',
            output: null,
            branches: [
              { step: 'a', input: {} },
              { step: 'b', input: {} },
            ],
            join: 'join',
          })}::jsonb
      where task_id = ${task.id}`;
    await applyAll(createMetrics());
    // `a` completed its branch; `b` completes its own just after the cancel is requested.
    await handle.sql`
      update task_steps set status = 'succeeded', attempts = 1, finished_at = now(),
        outcome = ${JSON.stringify({ type: 'complete', output: 'a' })}::jsonb
      where task_id = ${task.id} and name = 'a'`;
    await applyAll(createMetrics());
    await handle.sql`update tasks set cancel_requested = true where id = ${task.id}`;
    await handle.sql`
      update task_steps set status = 'succeeded', attempts = 1, finished_at = now(),
        outcome = ${JSON.stringify({ type: 'complete', output: 'b' })}::jsonb
      where task_id = ${task.id} and name = 'b'`;
    await cancelThenRetry(task);
    assert.equal(await statusOf(task.id), 'queued');
    assert.deepEqual(await readySteps(task.id), ['join']);
  });

  it('asks for the approval the ended step wanted when the cancelled task is retried', async () => {
    const task = await cancelRequestedWith({
      type: 'awaitApproval',
      output: 1,
      prompt: 'Send it?',
      timeoutMs: 60_000,
      onTimeout: 'cancel',
      then: { type: 'next', step: 'second', input: {} },
    });
    await cancelThenRetry(task);
    const [row] = await handle.sql<{ status: string; approval: { prompt: string } | null }[]>`
      select status, approval from tasks where id = ${task.id}`;
    assert.equal(row?.status, 'waiting_approval');
    assert.equal(row?.approval?.prompt, 'Send it?');
  });
});

describe('outcome applier: a branch that went on after its task stopped running', () => {
  const branching: TaskTypeManifest = {
    name: 'branching',
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'split',
    steps: ['split', 'a', 'b', 'b2', 'join'].map((name) => ({
      name,
      resource: 'llm',
      timeoutMs: 1_000,
      maxAttempts: 1,
    })),
  };
  const denied = { errorClass: 'permission_denied', message: '403', retryable: false } as const;

  async function record(taskId: string, name: string, status: string, outcome: StepOutcome) {
    await handle.sql`
      update task_steps
      set status = ${status}, attempts = attempts + 1, finished_at = now(),
          outcome = ${JSON.stringify(outcome)}::jsonb
      where task_id = ${taskId} and name = ${name} and not superseded and status = 'running'`;
  }

  /** A task whose fan-out runs `a` and `b`; `a` has failed it for good while `b` ran. */
  async function failedWhileBranchRuns() {
    await registerTaskType(handle.db, branching);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: branching,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id}`;
    await record(task.id, 'split', 'succeeded', {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'a', input: {} },
        { step: 'b', input: {} },
      ],
      join: 'join',
    });
    await applyAll(createMetrics());
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id} and fan_out_of = 1`;
    await record(task.id, 'a', 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'failed_terminal');
    return task;
  }

  async function retry(task: { id: string; tenantId: string; priority: number }) {
    await handle.db.transaction(async (tx) => {
      const retried = await applyTransition(tx, { taskId: task.id, event: { type: 'retry' } });
      assert.ok(retried.ok);
      await rerunUnfinishedSteps(tx, { ...task, attempt: 2 });
    });
  }

  async function readySteps(taskId: string): Promise<string[]> {
    const rows = await handle.sql<{ name: string }[]>`
      select name from task_steps where task_id = ${taskId} and status = 'ready' order by seq`;
    return rows.map((row) => row.name);
  }

  it('runs the next step of the branch when the failed task is retried', async () => {
    const task = await failedWhileBranchRuns();
    // `b` finished before its abort came: it asks for `b2` in its branch.
    await record(task.id, 'b', 'succeeded', { type: 'next', output: 1, step: 'b2', input: {} });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'failed_terminal', 'the failed task stays failed');
    assert.deepEqual(await readySteps(task.id), []);
    await retry(task);
    // Without `b2` the branch never completes and the join never starts: running for ever.
    assert.deepEqual(await readySteps(task.id), ['a', 'b2']);
  });

  it('runs the next step of the branch in the new attempt when it ends after a retry', async () => {
    const task = await failedWhileBranchRuns();
    await retry(task);
    assert.equal(await statusOf(task.id), 'queued');
    await record(task.id, 'b', 'succeeded', { type: 'next', output: 1, step: 'b2', input: {} });
    await applyAll(createMetrics());
    assert.deepEqual(await readySteps(task.id), ['a', 'b2']);
    const [b2] = await handle.sql<{ task_attempt: number; fan_out_of: number }[]>`
      select task_attempt, fan_out_of from task_steps where task_id = ${task.id} and name = 'b2'`;
    assert.deepEqual({ ...b2 }, { task_attempt: 2, fan_out_of: 1 });
  });
});

describe('outcome applier: a branch of an earlier attempt that failed after the retry', () => {
  const branching: TaskTypeManifest = {
    name: 'branching-failure',
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'split',
    steps: ['split', 'a', 'b', 'join'].map((name) => ({
      name,
      resource: 'llm',
      timeoutMs: 1_000,
      maxAttempts: 1,
    })),
  };
  const denied = { errorClass: 'permission_denied', message: '403', retryable: false } as const;

  async function record(taskId: string, seq: number, status: string, outcome: StepOutcome) {
    await handle.sql`
      update task_steps
      set status = ${status}, attempts = attempts + 1, finished_at = now(),
          outcome = ${JSON.stringify(outcome)}::jsonb
      where task_id = ${taskId} and seq = ${seq}`;
  }

  /** A fan-out task whose branch `a` (seq 2) failed it; retried while `b` (seq 3) still ran. */
  async function retriedWhileBranchRuns() {
    await registerTaskType(handle.db, branching);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: branching,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
    await record(task.id, 1, 'succeeded', {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'a', input: {} },
        { step: 'b', input: {} },
      ],
      join: 'join',
    });
    await applyAll(createMetrics());
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id} and seq in (2, 3)`;
    await record(task.id, 2, 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'failed_terminal');
    await handle.db.transaction(async (tx) => {
      const retried = await applyTransition(tx, { taskId: task.id, event: { type: 'retry' } });
      assert.ok(retried.ok);
      assert.deepEqual(await rerunUnfinishedSteps(tx, { ...task, attempt: 2 }), ['a']);
    });
    return task;
  }

  async function stepsOf(taskId: string) {
    const rows = await handle.sql<{ name: string; status: string; task_attempt: number }[]>`
      select name, status, task_attempt from task_steps
      where task_id = ${taskId} and not superseded and seq > 3 order by seq`;
    return rows.map((row) => ({ ...row }));
  }

  it('runs it again in the new attempt when it fails while the task is queued', async () => {
    const task = await retriedWhileBranchRuns();
    // `b` fails on its own before its abort came.
    await record(task.id, 3, 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'queued');
    assert.deepEqual(await stepsOf(task.id), [
      { name: 'a', status: 'ready', task_attempt: 2 },
      { name: 'b', status: 'ready', task_attempt: 2 },
    ]);
  });

  it('runs it again in the new attempt, not failing it, when it fails while the task runs', async () => {
    const task = await retriedWhileBranchRuns();
    // The new attempt has started `a` again when the old `b` fails.
    await handle.sql`update tasks set status = 'running' where id = ${task.id}`;
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id} and seq = 4`;
    await record(task.id, 3, 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'running', 'the old attempt failure fails nothing now');
    assert.deepEqual(await stepsOf(task.id), [
      { name: 'a', status: 'running', task_attempt: 2 },
      { name: 'b', status: 'ready', task_attempt: 2 },
    ]);
  });
});

describe('outcome applier: a continuation that cannot start', () => {
  // The executor's registry may ask for more than the task's pinned manifest declares (a rolling
  // deploy of a new version of the type): the scheduler then fails the task.
  const pinned: TaskTypeManifest = {
    name: 'pinned',
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'split',
    steps: ['split', 'a', 'b', 'join'].map((name) => ({
      name,
      resource: 'llm',
      timeoutMs: 1_000,
      maxAttempts: 1,
    })),
  };
  const denied = { errorClass: 'permission_denied', message: '403', retryable: false } as const;

  async function record(taskId: string, name: string, status: string, outcome: StepOutcome) {
    await handle.sql`
      update task_steps
      set status = ${status}, attempts = attempts + 1, finished_at = now(),
          outcome = ${JSON.stringify(outcome)}::jsonb
      where task_id = ${taskId} and name = ${name} and not superseded`;
  }

  async function runningTask() {
    await registerTaskType(handle.db, pinned);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: pinned,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
    return task;
  }

  /** RetryTask's writes: the transition and the steps run again (their names). */
  async function retry(task: { id: string; tenantId: string; priority: number }) {
    return handle.db.transaction(async (tx) => {
      const retried = await applyTransition(tx, { taskId: task.id, event: { type: 'retry' } });
      assert.ok(retried.ok);
      return rerunUnfinishedSteps(tx, { ...task, attempt: 2 });
    });
  }

  it('runs the step that asked for an undeclared next step again when the task is retried', async () => {
    const task = await runningTask();
    await record(task.id, 'split', 'succeeded', {
      type: 'next',
      output: 1,
      step: 'added-in-v2',
      input: {},
    });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'failed_terminal');
    const [step] = await handle.sql<{ status: string }[]>`
      select status from task_steps where task_id = ${task.id}`;
    assert.equal(step?.status, 'failed', 'the step whose outcome could not be applied failed');
    // Recorded succeeded, the retry had nothing to run: queued for ever.
    assert.deepEqual(await retry(task), ['split']);
  });

  it('runs a branch whose next step could not start after its task failed again on a retry', async () => {
    const task = await runningTask();
    await record(task.id, 'split', 'succeeded', {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'a', input: {} },
        { step: 'b', input: {} },
      ],
      join: 'join',
    });
    await applyAll(createMetrics());
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id} and fan_out_of = 1`;
    await record(task.id, 'a', 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.equal(await statusOf(task.id), 'failed_terminal');
    // `b` finished before its abort came, asking for a step the pinned manifest lacks.
    await record(task.id, 'b', 'succeeded', { type: 'next', output: 1, step: 'b2', input: {} });
    await applyAll(createMetrics());
    // Without `b` again its branch never completes: the join never starts, running for ever.
    assert.deepEqual(await retry(task), ['a', 'b']);
  });

  it('runs a branch whose next step could not start after a retry again in the new attempt', async () => {
    const task = await runningTask();
    await record(task.id, 'split', 'succeeded', {
      type: 'fanOut',
      output: null,
      branches: [
        { step: 'a', input: {} },
        { step: 'b', input: {} },
      ],
      join: 'join',
    });
    await applyAll(createMetrics());
    await handle.sql`update task_steps set status = 'running' where task_id = ${task.id} and fan_out_of = 1`;
    await record(task.id, 'a', 'failed', { type: 'failed', error: denied });
    await applyAll(createMetrics());
    assert.deepEqual(await retry(task), ['a']);
    await record(task.id, 'b', 'succeeded', { type: 'next', output: 1, step: 'b2', input: {} });
    await applyAll(createMetrics());
    const ready = await handle.sql<{ name: string; task_attempt: number }[]>`
      select name, task_attempt from task_steps
      where task_id = ${task.id} and status = 'ready' order by seq`;
    assert.deepEqual(
      ready.map((row) => ({ ...row })),
      [
        { name: 'a', task_attempt: 2 },
        { name: 'b', task_attempt: 2 },
      ],
    );
  });
});

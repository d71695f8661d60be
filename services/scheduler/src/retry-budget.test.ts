/**
 * The retry budget in the outcome applier, against the real Postgres: a burst of failures of one
 * resource gets its retries spread over later windows (durable due times and timers pushed, none
 * dropped, each task `failed_retryable` with the later time), while another resource's retries stay
 * at their backoff. Also the configuration: bad values stop the scheduler naming the variable.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { windowOf, type RetryBudgetConfig, type SerializedStepError } from '@sluice/core';
import {
  createTask,
  createTenant,
  listTaskEvents,
  migrateDatabase,
  nextAttemptAt,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { ConfigError } from '@sluice/runtime';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { loadSchedulerConfig } from './config.js';
import { applyOutcomeBatch } from './outcome-applier.js';
import { retryBudgetConfigOf } from './retry-budget-config.js';
import { createRetryBudgetLedger } from './retry-budget-ledger.js';

/** Backoff of at most 100 ms, so every delay beyond it is the budget's. */
const BACKOFF = { baseDelayMs: 100, maxDelayMs: 100 };
const typeOn = (name: string, resource: string): TaskTypeManifest => ({
  name,
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource, timeoutMs: 1_000, maxAttempts: 5, backoff: BACKOFF }],
});
const stormy = typeOn('stormy', 'tool:stormy');
const calm = typeOn('calm', 'tool:calm');
const rolled = typeOn('rolled', 'tool:rolled');
const serverError: SerializedStepError = {
  errorClass: 'external_5xx',
  message: 'HTTP 503',
  retryable: true,
};
/**
 * 5 s windows, 2 retries a window (0.4 a second) plus 20 % of attempts, pushed 60 s at most. The
 * test only reads the placements, so long windows cost no time, and the burst's own backoff times
 * (within 100 ms of applying) cannot spread over windows by themselves.
 */
const budget: RetryBudgetConfig = {
  ratio: 0.2,
  windowMs: 5_000,
  minRetriesPerSecond: 0.4,
  maxDeferMs: 60_000,
};
const BURST = 10;

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, stormy);
  await registerTaskType(handle.db, calm);
  await registerTaskType(handle.db, rolled);
});

after(async () => {
  await handle?.close();
  await database?.drop();
});

/** A running task whose only step failed its first attempt; its id. */
async function failedTask(type: TaskTypeManifest): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: type,
    priority: 2,
    input: {},
  });
  await handle.sql`update tasks set status = 'running', started_at = now() where id = ${task.id}`;
  await handle.sql`
    update task_steps
    set status = 'failed', attempts = 1, finished_at = now(),
        outcome = ${JSON.stringify({ type: 'failed', error: serverError })}::jsonb
    where task_id = ${task.id}`;
  return task.id;
}

interface Retried {
  readonly status: string;
  readonly dueAt: number;
  readonly timerAt: number;
  readonly eventAt: number;
  readonly deferredMs: number;
}

async function retriedOf(taskId: string): Promise<Retried> {
  const [task] = await handle.sql<
    { status: string }[]
  >`select status from tasks where id = ${taskId}`;
  const [timer] = await handle.sql<{ due_ms: number }[]>`
    select (extract(epoch from due_at) * 1000)::float8 as due_ms
    from task_timers where task_id = ${taskId}`;
  const due = await nextAttemptAt(handle.db, taskId);
  const event = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
  assert.equal(event?.type, 'fail_retryable');
  return {
    status: task?.status ?? '',
    dueAt: due?.getTime() ?? Number.NaN,
    timerAt: Math.round(timer?.due_ms ?? Number.NaN),
    eventAt: Date.parse(event.data?.['next_attempt_at'] as string),
    deferredMs: Number(event.data?.['retry_budget_deferred_ms'] ?? 0),
  };
}

describe('retry budget in the outcome applier', () => {
  it('spreads a burst of one resource over later windows; another resource is unaffected', async () => {
    const stormyIds: string[] = [];
    for (let i = 0; i < BURST; i += 1) stormyIds.push(await failedTask(stormy));
    const calmIds = [await failedTask(calm), await failedTask(calm)];
    const metrics = createMetrics();
    const retryBudget = createRetryBudgetLedger(budget);
    const appliedAt = Date.now();
    const deps = {
      db: handle.db,
      log: createLogger({ service: 'retry-budget-test', level: 'silent' }),
      metrics,
      batchSize: 50,
      onStepsReady: () => undefined,
      abortRunningSteps: () => undefined,
      retryBudget,
    };
    while (await applyOutcomeBatch(deps));
    const doneAt = Date.now();

    const stormyRetries = await Promise.all(stormyIds.map(retriedOf));
    const calmRetries = await Promise.all(calmIds.map(retriedOf));
    for (const retried of [...stormyRetries, ...calmRetries]) {
      assert.equal(retried.status, 'failed_retryable', 'none dropped, none failed');
      assert.equal(retried.timerAt, retried.dueAt, 'the durable timer is the pushed time');
      assert.equal(retried.eventAt, retried.dueAt, 'the event shows the pushed time');
    }

    // At most floor(2 + 0.2 × 10) = 4 retries of the stormy resource per window: 10 need ≥ 3.
    const perWindow = new Map<number, number>();
    for (const { dueAt } of stormyRetries) {
      const window = windowOf(dueAt, budget);
      perWindow.set(window, (perWindow.get(window) ?? 0) + 1);
    }
    assert.ok(perWindow.size >= 3, `spread over ${perWindow.size} windows`);
    assert.ok(
      [...perWindow.values()].every((count) => count <= 4),
      JSON.stringify([...perWindow]),
    );
    // Those that missed their window's room were pushed; how many depends on where the window
    // boundaries fall, but with at most 4 a window some must be.
    const deferred = stormyRetries.filter((r) => r.deferredMs > 0);
    assert.ok(deferred.length >= 1, 'some were pushed later');
    const latest = Math.max(...stormyRetries.map((r) => r.dueAt));
    assert.ok(latest > appliedAt + budget.windowMs, 'the last ones wait at least a window longer');
    assert.ok(latest <= doneAt + BACKOFF.maxDelayMs + budget.maxDeferMs, 'bounded');

    for (const retried of calmRetries) {
      assert.equal(retried.deferredMs, 0, 'the calm resource keeps its own budget');
      assert.ok(retried.dueAt <= doneAt + BACKOFF.maxDelayMs, 'due at its backoff');
    }

    const exhausted = (await metrics.retryBudgetExhausted.get()).values;
    const count = (resource: string) =>
      exhausted.find((v) => v.labels['resource'] === resource)?.value ?? 0;
    assert.equal(count('tool:stormy'), deferred.length);
    assert.equal(count('tool:calm'), 0);
    const retries = (await metrics.retryCount.get()).values;
    assert.equal(retries.find((v) => v.labels['error_class'] === 'external_5xx')?.value, BURST + 2);
  });
});

describe('retry budget after a rolled-back pass', () => {
  it('counts only the retries of a pass that committed', async () => {
    // Four retries a window whatever the attempts, so a retry counted by a pass that rolled back
    // (the ledger's count is in memory, the pass's writes are gone) takes a real one's room.
    const four: RetryBudgetConfig = {
      ratio: 0,
      windowMs: 10_000,
      minRetriesPerSecond: 0.4,
      maxDeferMs: 60_000,
    };
    const ids: string[] = [];
    for (let i = 0; i < 4; i += 1) ids.push(await failedTask(rolled));
    const deps = {
      db: handle.db,
      log: createLogger({ service: 'retry-budget-test', level: 'silent' }),
      metrics: createMetrics(),
      batchSize: 50,
      onStepsReady: () => undefined,
      abortRunningSteps: () => undefined,
      retryBudget: createRetryBudgetLedger(four),
    };
    // The first passes fail after placing their first retry: its task's transition is refused by
    // a trigger, as a lost connection or a deadlock would fail the pass.
    await handle.sql.unsafe(`
      create function refuse_fail_retryable() returns trigger language plpgsql as $$
      begin
        if new.type = 'fail_retryable' then raise exception 'pass fails'; end if;
        return new;
      end $$;
      create trigger refuse_fail_retryable before insert on task_events
        for each row execute function refuse_fail_retryable();
    `);
    try {
      for (let pass = 0; pass < 3; pass += 1) {
        await assert.rejects(applyOutcomeBatch(deps), (error: Error) =>
          /pass fails/.test(String(error.cause)),
        );
      }
    } finally {
      await handle.sql.unsafe(`
        drop trigger refuse_fail_retryable on task_events;
        drop function refuse_fail_retryable();
      `);
    }
    while (await applyOutcomeBatch(deps));
    const retries = await Promise.all(ids.map(retriedOf));
    assert.deepEqual(
      retries.map((retried) => ({ status: retried.status, deferredMs: retried.deferredMs })),
      ids.map(() => ({ status: 'failed_retryable', deferredMs: 0 })),
      'four retries in a budget of four a window: none pushed later',
    );
  });
});

describe('retry budget configuration', () => {
  it('reads the defaults and the variables', () => {
    assert.deepEqual(retryBudgetConfigOf(loadSchedulerConfig({})), {
      ratio: 0.2,
      windowMs: 10_000,
      minRetriesPerSecond: 10,
      maxDeferMs: 60_000,
    });
    const config = loadSchedulerConfig({
      SLUICE_RETRY_BUDGET_RATIO: '0.5',
      SLUICE_RETRY_BUDGET_WINDOW_MS: '2000',
      SLUICE_RETRY_BUDGET_MIN_PER_SECOND: '0.5',
      SLUICE_RETRY_BUDGET_MAX_DEFER_MS: '0',
    });
    assert.deepEqual(retryBudgetConfigOf(config), {
      ratio: 0.5,
      windowMs: 2_000,
      minRetriesPerSecond: 0.5,
      maxDeferMs: 0,
    });
  });

  const bad: Array<[string, string]> = [
    ['SLUICE_RETRY_BUDGET_RATIO', '-0.1'],
    ['SLUICE_RETRY_BUDGET_RATIO', 'lots'],
    ['SLUICE_RETRY_BUDGET_RATIO', '101'],
    ['SLUICE_RETRY_BUDGET_WINDOW_MS', '0'],
    ['SLUICE_RETRY_BUDGET_WINDOW_MS', '1.5'],
    ['SLUICE_RETRY_BUDGET_MIN_PER_SECOND', '-1'],
    ['SLUICE_RETRY_BUDGET_MAX_DEFER_MS', '-5'],
  ];
  for (const [variable, value] of bad) {
    it(`refuses ${variable}=${value}, naming it`, () => {
      assert.throws(
        () => loadSchedulerConfig({ [variable]: value }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.variable === variable &&
          error.message.startsWith(`configuration error: ${variable}: `) &&
          !error.message.includes('\n'),
      );
    });
  }
});

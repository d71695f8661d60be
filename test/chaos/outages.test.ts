/**
 * Outages of the infrastructure in the middle of a run (issue 4, "Done when" 4–6), against the real
 * services as child processes on a private nats-server or a private Postgres:
 *
 * 4. the nats-server restarts: the services reconnect by themselves and every task finishes;
 * 5. JetStream loses its store (server stopped, store deleted, started again on the same port):
 *    the services recreate streams and consumers, the reconciler re-dispatches what was lost, and
 *    every task finishes with each step's success recorded once;
 * 6. Postgres is down for 10 s under load: creates are answered UNAVAILABLE within a bound (never a
 *    hang, never a half-created task), the services recover by themselves, and creates retried with
 *    the same idempotency key end up as exactly one task each.
 *
 * Each scenario ends with the database invariants (test/support/invariants.ts), every task final.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, it, type TestContext } from 'node:test';
import { status } from '@grpc/grpc-js';
import { natsUrl, startNatsServer, uniquePrefix } from '@sluice/bus/testing';
import {
  createApiKey,
  createTenant,
  migrateDatabase,
  openDatabase,
  type DatabaseHandle,
} from '@sluice/db';
import { startPostgresServer } from '@sluice/db/testing';
import { createTaskClient, isServiceError, type TaskClient } from '@sluice/sdk/client';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { startStack, type Stack } from '../support/stack.js';
import { testScale } from '../support/test-scale.js';
import { OUTAGE_CHAIN_STEPS, OUTAGE_RESOURCES } from './outage-task-types.js';

const TASK_MODULE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'outage-task-types.ts');
const TENANT = 'acme';
/** Nothing answers here; no step of the outage types calls a model. */
const NO_LLM_BASE_URL = 'http://127.0.0.1:9/v1';
/** The client's deadline per call; the gateway must answer well within it, even without Postgres. */
const CLIENT_TIMEOUT_MS = 30_000;
/** The longest a create may take while Postgres is down (the gateway's bound plus slack). */
const MAX_UNAVAILABLE_ANSWER_MS = 15_000;
/** How long Postgres stays down in scenario 6. */
const POSTGRES_OUTAGE_MS = 10_000;
/** Creates in flight at once while submitting. */
const SUBMIT_CONCURRENCY = 8;

/**
 * Short timings so that a lost dispatch is noticed within seconds: JetStream's ack wait, the
 * reconciler's pass and staleness thresholds, and heartbeats well inside them.
 */
const SERVICE_ENV: Record<string, string> = {
  SLUICE_TASK_MODULES: TASK_MODULE,
  SLUICE_EXECUTOR_SLOTS: '8',
  SLUICE_SCHEDULER_POLL_MS: '100',
  SLUICE_ACK_WAIT_MS: '3000',
  SLUICE_HEARTBEAT_MS: '300',
  SLUICE_LEASE_TTL_MS: '3000',
  SLUICE_RECONCILE_INTERVAL_MS: '300',
  SLUICE_DISPATCH_GRACE_MS: '1000',
  SLUICE_STEP_STALE_MS: '4000',
  SLUICE_WATCH_RECHECK_MS: '500',
  // The gateway's bound on a unary call, below MAX_UNAVAILABLE_ANSWER_MS: a create that waits on
  // the stopped database is answered UNAVAILABLE by then at the latest.
  SLUICE_UNARY_TIMEOUT_MS: '10000',
};

/** A stack on the given servers, a tenant and a client of it. */
interface Run {
  readonly stack: Stack;
  readonly handle: DatabaseHandle;
  readonly client: TaskClient;
  stop(): Promise<void>;
}

async function startRun(options: {
  readonly label: string;
  readonly natsUrl: string;
  readonly databaseUrl: string;
}): Promise<Run> {
  const handle = openDatabase(options.databaseUrl, { max: 4 });
  try {
    await createTenant(handle.db, { id: TENANT });
    const apiKey = await createApiKey(handle.db, { tenantId: TENANT });
    const stack = await startStack({
      natsUrl: options.natsUrl,
      databaseUrl: options.databaseUrl,
      prefix: uniquePrefix(options.label),
      llmBaseUrl: NO_LLM_BASE_URL,
      resources: [...OUTAGE_RESOURCES],
      env: SERVICE_ENV,
    });
    const client = createTaskClient({
      address: stack.grpcAddress,
      apiKey,
      timeoutMs: CLIENT_TIMEOUT_MS,
    });
    return {
      stack,
      handle,
      client,
      async stop() {
        client.close();
        await stack.stop();
        await handle.close();
      },
    };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * Polls `probe` until it returns a value; fails after the deadline with `what`, and with what
 * `explain` then says of where things stand, if given.
 */
async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
  explain?: () => Promise<string>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const state = explain ? `; ${await explain()}` : '';
      throw new Error(`timed out waiting until ${what}${state}`);
    }
    await delay(50);
  }
}

/** Tasks of the tenant by status. */
async function statusCounts(handle: DatabaseHandle): Promise<Record<string, number>> {
  const rows = await handle.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from tasks where tenant_id = ${TENANT} group by status`;
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

async function succeededCount(handle: DatabaseHandle): Promise<number> {
  return (await statusCounts(handle))['succeeded'] ?? 0;
}

/** The tenant's steps by status, and how many in flight have no publication sequence yet. */
async function stepCounts(handle: DatabaseHandle): Promise<Record<string, number>> {
  const rows = await handle.sql<{ status: string; n: number; unpublished: number }[]>`
    select status, count(*)::int as n,
      (count(*) filter (where status = 'dispatched' and publish_seq is null))::int as unpublished
    from task_steps where tenant_id = ${TENANT} group by status`;
  const counts: Record<string, number> = {};
  for (const row of rows) {
    counts[row.status] = row.n;
    if (row.unpublished > 0) counts['dispatched without publish_seq'] = row.unpublished;
  }
  return counts;
}

/** Waits until `expected` tasks exist and all of them succeeded; fails on any other final state. */
async function waitAllSucceeded(
  handle: DatabaseHandle,
  expected: number,
  // Generous for a loaded 2-core machine, and growing with the scale (`npm run test:chaos`).
  timeoutMs = Math.max(90_000, expected * 400),
) {
  await eventually(
    async () => {
      const counts = await statusCounts(handle);
      const failed = Object.entries(counts).filter(([s]) =>
        ['failed', 'cancelled', 'dead_lettered'].includes(s),
      );
      assert.deepEqual(failed, [], 'no task ends in another final state');
      return counts['succeeded'] === expected ? counts : undefined;
    },
    `all ${expected} tasks succeeded`,
    timeoutMs,
    // Where the work stopped, for a run that times out (once in CI, session 52, not reproduced).
    async () => {
      const [tasks, steps] = await Promise.all([statusCounts(handle), stepCounts(handle)]);
      return `tasks ${JSON.stringify(tasks)}, steps ${JSON.stringify(steps)}`;
    },
  );
}

/** Runs `work` on every item, at most `concurrency` at a time, in order of the items. */
async function forEachConcurrently<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Creates `count` tasks labelled `<label>-<i>` (also their idempotency keys), a few at a time. */
async function submitTasks(client: TaskClient, label: string, count: number): Promise<void> {
  const labels = Array.from({ length: count }, (_, index) => `${label}-${index}`);
  await forEachConcurrently(labels, SUBMIT_CONCURRENCY, async (taskLabel) => {
    await client.createTask({
      type: 'outage-chain',
      priority: taskLabel.endsWith('0') ? 'PRIORITY_P1' : 'PRIORITY_P2',
      input: { label: taskLabel },
      idempotencyKey: taskLabel,
    });
  });
}

/** Dispatches beyond the first (a lost or redelivered dispatch made again), over all steps. */
async function redispatches(handle: DatabaseHandle): Promise<number> {
  const [row] = await handle.sql<{ n: number }[]>`
    select coalesce(sum(greatest(dispatch_count - 1, 0)), 0)::int as n from task_steps`;
  return row?.n ?? 0;
}

/** Every step of every task succeeded, and its success is recorded exactly once. */
async function assertEachStepSucceededOnce(handle: DatabaseHandle, tasks: number) {
  const [steps] = await handle.sql<{ total: number; succeeded: number }[]>`
    select count(*)::int as total,
      count(*) filter (where status = 'succeeded')::int as succeeded
    from task_steps`;
  assert.equal(steps?.total, tasks * OUTAGE_CHAIN_STEPS, 'no step created twice');
  assert.equal(steps?.succeeded, tasks * OUTAGE_CHAIN_STEPS, 'every step succeeded');
  const [events] = await handle.sql<{ n: number }[]>`
    select count(*)::int as n from task_events where type = 'step_succeeded'`;
  assert.equal(events?.n, tasks * OUTAGE_CHAIN_STEPS, "each step's success recorded once");
}

/**
 * Waits (from now) until more tasks succeeded than `before`; returns the milliseconds it took,
 * the time the run needed to make progress again after an outage.
 */
async function timeToProgress(handle: DatabaseHandle, before: number): Promise<number> {
  const from = Date.now();
  await eventually(
    async () => ((await succeededCount(handle)) > before ? true : undefined),
    'a task succeeds after the outage',
  );
  return Date.now() - from;
}

function report(t: TestContext, figures: Record<string, number | string>): void {
  t.diagnostic(
    Object.entries(figures)
      .map(([key, value]) => `${key}=${value}`)
      .join(' '),
  );
}

/** On failure: each service's last warnings and errors, to see what got stuck. */
function reportServiceTrouble(t: TestContext, stack: Stack): void {
  const troubled = new Set(['warn', 'error', 'fatal']);
  for (const service of stack.all) {
    t.diagnostic(`${service.options.name} (${service.running ? 'running' : 'exited'}):`);
    const trouble = service.lines
      .filter((line) => typeof line['level'] === 'string' && troubled.has(line['level']))
      .slice(-8);
    for (const line of trouble) t.diagnostic(`  ${JSON.stringify(line).slice(0, 500)}`);
    for (const line of service.stderr.slice(-12)) t.diagnostic(`  ! ${line.slice(0, 300)}`);
  }
}

/** Every service process still runs (none crashed or gave up during the outage). */
function assertServicesRunning(stack: Stack): void {
  for (const service of stack.all) {
    assert.ok(
      service.running,
      `${service.options.name} still runs:\n${service.stderr.slice(-10).join('\n')}`,
    );
  }
}

describe('infrastructure outages in the middle of a run', { concurrency: false }, () => {
  it('a nats-server restart: the services reconnect and every task finishes', async (t) => {
    const tasks = testScale();
    await using nats = await startNatsServer();
    // A private Postgres too: the shared one's connection slots run out when several stacks run.
    await using postgres = await startPostgresServer();
    await migrateDatabase(postgres.url);
    const run = await startRun({
      label: 'nats_restart',
      natsUrl: nats.url,
      databaseUrl: postgres.url,
    });
    try {
      const started = Date.now();
      const firstHalf = Math.ceil(tasks / 2);
      await submitTasks(run.client, 'restart-a', firstHalf);
      await eventually(
        async () => ((await succeededCount(run.handle)) >= Math.ceil(tasks / 8) ? true : undefined),
        'an eighth of the tasks succeeded',
      );
      // The rest is submitted while the server goes down and comes back (creates need only
      // Postgres; the wake-ups they publish are buffered by the client or lost, which polls cover).
      const outageStart = Date.now();
      const secondHalf = submitTasks(run.client, 'restart-b', tasks - firstHalf);
      await nats.restart();
      const outageMs = Date.now() - outageStart;
      const succeededAtRestart = await succeededCount(run.handle);
      const recoverMs = await timeToProgress(run.handle, succeededAtRestart);
      await secondHalf;
      await waitAllSucceeded(run.handle, tasks);
      const wallMs = Date.now() - started;

      assertServicesRunning(run.stack);
      await assertEachStepSucceededOnce(run.handle, tasks);
      await assertDatabaseInvariants(run.handle, { tenantId: TENANT, requireFinal: true });
      report(t, {
        scenario: 'nats-restart',
        tasks,
        wall_ms: wallMs,
        outage_ms: outageMs,
        recover_ms: recoverMs,
        succeeded_before_restart: succeededAtRestart,
        redispatches: await redispatches(run.handle),
      });
    } catch (error) {
      reportServiceTrouble(t, run.stack);
      throw error;
    } finally {
      await run.stop();
    }
  });

  it('JetStream loses its store: topology is recreated, lost work re-dispatched, every task finishes', async (t) => {
    const tasks = testScale();
    await using nats = await startNatsServer();
    // A private Postgres too: the shared one's connection slots run out when several stacks run.
    await using postgres = await startPostgresServer();
    await migrateDatabase(postgres.url);
    const run = await startRun({
      label: 'store_loss',
      natsUrl: nats.url,
      databaseUrl: postgres.url,
    });
    try {
      const started = Date.now();
      await submitTasks(run.client, 'loss', tasks);
      await eventually(
        async () => ((await succeededCount(run.handle)) >= Math.ceil(tasks / 8) ? true : undefined),
        'an eighth of the tasks succeeded',
      );
      const [inFlight] = await run.handle.sql<{ n: number }[]>`
        select count(*)::int as n from task_steps where status in ('dispatched', 'running')`;

      const outageStart = Date.now();
      await nats.stop();
      await rm(nats.storeDir, { recursive: true, force: true });
      await nats.restart();
      const outageMs = Date.now() - outageStart;
      const succeededAtRestart = await succeededCount(run.handle);
      const recoverMs = await timeToProgress(run.handle, succeededAtRestart);
      await waitAllSucceeded(run.handle, tasks);
      const wallMs = Date.now() - started;

      assertServicesRunning(run.stack);
      await assertEachStepSucceededOnce(run.handle, tasks);
      await assertDatabaseInvariants(run.handle, { tenantId: TENANT, requireFinal: true });
      const lost = await redispatches(run.handle);
      report(t, {
        scenario: 'store-loss',
        tasks,
        wall_ms: wallMs,
        outage_ms: outageMs,
        recover_ms: recoverMs,
        in_flight_at_loss: inFlight?.n ?? 0,
        redispatches: lost,
      });
    } catch (error) {
      reportServiceTrouble(t, run.stack);
      throw error;
    } finally {
      await run.stop();
    }
  });

  it('Postgres down for 10 s under load: UNAVAILABLE within a bound, retried creates become one task each', async (t) => {
    const tasks = testScale();
    await using postgres = await startPostgresServer();
    await migrateDatabase(postgres.url);
    const run = await startRun({
      label: 'pg_outage',
      natsUrl: natsUrl(),
      databaseUrl: postgres.url,
    });
    try {
      const started = Date.now();
      // A third of the keys before the outage, a third during it, the rest after it.
      const keys = Array.from({ length: tasks }, (_, i) => `pg-${i}`);
      const third = Math.ceil(tasks / 3);
      const [before, during, after] = [
        keys.slice(0, third),
        keys.slice(third, 2 * third),
        keys.slice(2 * third),
      ];
      const answers: Array<{ key: string; ms: number; code: number | 'ok' }> = [];
      /** One create; true when accepted, false when refused as UNAVAILABLE (anything else throws). */
      const create = async (key: string): Promise<boolean> => {
        const from = Date.now();
        try {
          await run.client.createTask({
            type: 'outage-chain',
            priority: 'PRIORITY_P1',
            input: { label: key },
            idempotencyKey: key,
          });
          answers.push({ key, ms: Date.now() - from, code: 'ok' });
          return true;
        } catch (error) {
          if (!isServiceError(error)) throw error;
          answers.push({ key, ms: Date.now() - from, code: error.code });
          if (error.code !== status.UNAVAILABLE) {
            throw new Error(`create ${key}: ${error.code} ${error.details}`, { cause: error });
          }
          return false;
        }
      };
      /** Retries a create with the same key until it is accepted (Postgres is back by then). */
      const createUntilAccepted = (key: string) =>
        eventually(
          async () => ((await create(key)) ? true : undefined),
          `the create of ${key} is accepted`,
          30_000,
        );

      await forEachConcurrently(before, SUBMIT_CONCURRENCY, createUntilAccepted);
      await eventually(
        async () =>
          (await succeededCount(run.handle)) >= Math.ceil(tasks / 10) ? true : undefined,
        'a tenth of the tasks succeeded',
      );

      // Postgres goes away under load: the middle third is created at a steady pace across the
      // outage; what is refused is retried with its key after the recovery.
      const outageStart = Date.now();
      await postgres.stop();
      const refused: string[] = [];
      const producers = 4;
      const paceMs = Math.floor((POSTGRES_OUTAGE_MS * producers) / Math.max(1, during.length));
      const duringOutage = forEachConcurrently(during, producers, async (key) => {
        if (!(await create(key))) refused.push(key);
        await delay(paceMs);
      });
      await delay(POSTGRES_OUTAGE_MS);
      await postgres.restart();
      const upAt = Date.now();
      const outageMs = upAt - outageStart;
      const succeededAtRecovery = await succeededCount(run.handle);
      const recovered = timeToProgress(run.handle, succeededAtRecovery);
      await duringOutage;

      for (const key of refused) await createUntilAccepted(key);
      await forEachConcurrently(after, SUBMIT_CONCURRENCY, createUntilAccepted);
      const recoverMs = await recovered;
      await waitAllSucceeded(run.handle, tasks);
      const wallMs = Date.now() - started;

      assert.ok(refused.length > 0, 'creates during the outage were refused');
      const unavailable = answers.filter((a) => a.code !== 'ok');
      assert.deepEqual(
        unavailable.filter((a) => a.code !== status.UNAVAILABLE),
        [],
        'creates are accepted or refused as UNAVAILABLE, nothing else',
      );
      const slowest = Math.max(0, ...answers.map((a) => a.ms));
      assert.ok(
        slowest < MAX_UNAVAILABLE_ANSWER_MS,
        `every create was answered within ${MAX_UNAVAILABLE_ANSWER_MS} ms (slowest ${slowest} ms)`,
      );
      const perKey = await run.handle.sql<{ key: string; n: number }[]>`
        select idempotency_key as key, count(*)::int as n from tasks
        where tenant_id = ${TENANT} group by idempotency_key`;
      assert.equal(perKey.length, keys.length, 'one task per key, none without a key');
      assert.deepEqual(
        perKey.filter((row) => row.n !== 1),
        [],
        'each key ended up as exactly one task',
      );
      assertServicesRunning(run.stack);
      await assertEachStepSucceededOnce(run.handle, tasks);
      await assertDatabaseInvariants(run.handle, { tenantId: TENANT, requireFinal: true });
      report(t, {
        scenario: 'postgres-down',
        tasks,
        wall_ms: wallMs,
        outage_ms: outageMs,
        recover_ms: recoverMs,
        creates_refused: refused.length,
        unavailable_answers: unavailable.length,
        slowest_create_ms: slowest,
        redispatches: await redispatches(run.handle),
      });
    } catch (error) {
      reportServiceTrouble(t, run.stack);
      throw error;
    } finally {
      await run.stop();
    }
  });
});

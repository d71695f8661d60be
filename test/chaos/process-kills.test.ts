/**
 * Processes of the real stack killed with SIGKILL in the middle of a run (issue 4, "Done when"
 * 1–3), each scenario ended by the database invariant check:
 *
 * 1. executors killed mid-step, again and again, each replaced by a fresh one;
 * 2. the scheduler killed while it dispatches (a claim committed, its publication not recorded),
 *    and replaced;
 * 3. the gateway killed between the commit of CreateTask and its answer (the test-only
 *    `SLUICE_FAULT_INJECTION=crash_after_create_commit`); the client retries with its idempotency
 *    key against a gateway without the fault.
 *
 * Every scenario runs `testScale()` `chaos-flow` tasks (chaos-task-types.ts: a fan-out over two
 * resources whose steps work some tens of ms) in a tenant of its own on one shared stack, waits
 * until all are final, and checks that every task succeeded with each step's success recorded
 * once. Figures go to the test's diagnostics.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it, type TestContext } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Priority } from '@sluice/api';
import { natsUrl } from '@sluice/bus/testing';
import { isFinalStatus, isTaskStatus } from '@sluice/core';
import { createApiKey, createTenant, type DatabaseHandle } from '@sluice/db';
import { createTaskClient, isServiceError, type TaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { ServiceProcess } from '../support/service-process.js';
import { testScale } from '../support/test-scale.js';
import { CHAOS_RESOURCES, chaosFlowSteps } from './chaos-task-types.js';

const TASK_MODULE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'chaos-task-types.ts');

const SCALE = testScale();
/** Parts of each `chaos-flow` task's fan-out. */
const BRANCHES = 2;
const STEPS_PER_TASK = chaosFlowSteps(BRANCHES);
/** Executor kills of scenario 1 (alternating between the two resources). */
const EXECUTOR_KILLS = 4;
/** Scheduler kills of scenario 2. */
const SCHEDULER_KILLS = 4;
/** Gateways of scenario 3 that each die at the first commit of a burst of concurrent creates. */
const GATEWAY_CRASHES = Math.min(3, SCALE);
/** CreateTask calls in flight at once when a scenario submits its tasks. */
const CREATE_CONCURRENCY = 16;
/**
 * How long a scenario may take to bring every task to a final state: generous, since the 2-core
 * machine is shared, and growing with the scale (`npm run test:chaos` runs 1,000 per scenario).
 */
const FINISH_DEADLINE_MS = 90_000 + SCALE * 600;
/** How long a kill waits for its moment (a step running, a claim in flight) before giving up. */
const MOMENT_DEADLINE_MS = 30_000 + SCALE * 60;

let e2e: E2eStack;
let handle: DatabaseHandle;

before(async () => {
  e2e = await startE2eStack({
    label: 'kills',
    maxConnections: 4,
    resources: [...CHAOS_RESOURCES],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_EXECUTOR_SLOTS: '6',
      SLUICE_SCHEDULER_POLL_MS: '100',
      // A killed executor's messages come back after the ack wait; its steps' Postgres heartbeats
      // stop, so the redelivery takes them over.
      SLUICE_ACK_WAIT_MS: '2000',
      SLUICE_HEARTBEAT_MS: '200',
      // A message may sit with several executors killed in a row (and be handed back once as
      // "busy" while its heartbeat looks fresh): room for that, so JetStream does not give up on
      // a step this test kills on purpose.
      SLUICE_MAX_DELIVER: '20',
      // A killed scheduler's leases (relay, reconciler) pass to its replacement within a second,
      // and its claims that were never published are found within another.
      SLUICE_LEASE_TTL_MS: '1000',
      SLUICE_RECONCILE_INTERVAL_MS: '250',
      SLUICE_DISPATCH_GRACE_MS: '1000',
      SLUICE_STEP_STALE_MS: '3000',
    },
  });
  handle = e2e.handle;
});

after(async () => {
  await e2e?.stop();
});

/** A tenant of its own for a scenario, and a client of it on the stack's gateway. */
async function scenarioTenant(tenantId: string): Promise<{ client: TaskClient; apiKey: string }> {
  await createTenant(handle.db, { id: tenantId });
  const apiKey = await createApiKey(handle.db, { tenantId });
  return { client: createTaskClient({ address: e2e.stack.grpcAddress, apiKey }), apiKey };
}

/** What the `index`-th task of a scenario is created with (work and priority vary a little). */
function taskParams(scenario: string, index: number) {
  return {
    type: 'chaos-flow',
    priority: (index % 2 === 0 ? 'PRIORITY_P1' : 'PRIORITY_P2') as Priority,
    input: { label: `${scenario}-${index}`, branches: BRANCHES, workMs: 20 + (index % 5) * 10 },
    idempotencyKey: `${scenario}-${index}`,
  };
}

/** How long a create is retried while the gateway answers UNAVAILABLE (a loaded machine). */
const CREATE_RETRY_DEADLINE_MS = 120_000;

/**
 * CreateTask as a careful client does it: an UNAVAILABLE or DEADLINE_EXCEEDED answer (the gateway
 * busy, or gone) is retried with the same idempotency key, which makes the retry safe. Resolves
 * with the answer and how many calls it took.
 */
async function createWithRetry(client: TaskClient, params: ReturnType<typeof taskParams>) {
  const deadline = Date.now() + CREATE_RETRY_DEADLINE_MS;
  for (let calls = 1; ; calls += 1) {
    try {
      return { ...(await client.createTask(params)), calls };
    } catch (error) {
      const retryable =
        isServiceError(error) &&
        (error.code === grpcStatus.UNAVAILABLE || error.code === grpcStatus.DEADLINE_EXCEEDED);
      if (!retryable || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** Creates `count` tasks, `CREATE_CONCURRENCY` at a time; resolves with their ids. */
async function createTasks(client: TaskClient, scenario: string, count: number): Promise<string[]> {
  const ids: string[] = new Array<string>(count);
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < count; index = next++) {
      const { task } = await createWithRetry(client, taskParams(scenario, index));
      ids[index] = task.task_id;
    }
  };
  await Promise.all(Array.from({ length: CREATE_CONCURRENCY }, worker));
  return ids;
}

/** Polls `probe` every `everyMs` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs: number,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Tasks of the tenant by status. */
async function statusCounts(tenantId: string): Promise<Record<string, number>> {
  const rows = await handle.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from tasks where tenant_id = ${tenantId} group by status`;
  return Object.fromEntries(rows.map((row) => [row.status, row.n]));
}

function finalCount(counts: Record<string, number>): number {
  return Object.entries(counts)
    .filter(([status]) => isTaskStatus(status) && isFinalStatus(status))
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Steps of the tenant whose success is recorded. */
async function succeededSteps(tenantId: string): Promise<number> {
  const [row] = await handle.sql<{ n: number }[]>`
    select count(*)::int as n from task_steps where tenant_id = ${tenantId} and status = 'succeeded'`;
  return row?.n ?? 0;
}

/** Waits until the tenant's `expected` tasks are all final; a timeout names what is stuck. */
async function waitUntilAllFinal(tenantId: string, expected: number): Promise<void> {
  const deadline = Date.now() + FINISH_DEADLINE_MS;
  for (;;) {
    const counts = await statusCounts(tenantId);
    const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
    if (total === expected && finalCount(counts) === expected) return;
    if (Date.now() > deadline) {
      const stuck = await handle.sql<
        { task_id: string; seq: number; name: string; status: string; dispatch_count: number }[]
      >`
        select s.task_id, s.seq, s.name, s.status, s.dispatch_count
        from task_steps s join tasks t on t.id = s.task_id
        where t.tenant_id = ${tenantId} and t.status not in ('succeeded', 'failed_terminal', 'cancelled')
          and s.status <> 'succeeded'
        order by s.task_id, s.seq limit 10`;
      assert.fail(
        `not every task is final after ${FINISH_DEADLINE_MS} ms: ${JSON.stringify(counts)} ` +
          `(expected ${expected}); unfinished steps: ${JSON.stringify(stuck)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** What a scenario left behind, for its diagnostics. */
interface RunFigures {
  /** Step starts beyond the first (a killed executor's step taken over by another). */
  readonly restartedSteps: number;
  /** Dispatches beyond the first (steps the reconciler found lost and dispatched again). */
  readonly redispatches: number;
  readonly redispatchEvents: number;
}

/**
 * The end of every scenario: all `tasks` succeeded, every step exactly once in its success, no
 * step failed, and the invariants of test/support/invariants.ts hold with every task final.
 */
async function assertAllSucceeded(tenantId: string, tasks: number): Promise<RunFigures> {
  const summary = await assertDatabaseInvariants(handle, { tenantId, requireFinal: true });
  assert.deepEqual(summary.byStatus, { succeeded: tasks }, 'every task succeeded');
  assert.equal(summary.deadLetters, 0, 'no dead letters');
  const [steps] = await handle.sql<
    { total: number; succeeded: number; restarted: number; redispatches: number }[]
  >`
    select count(*)::int as total,
      count(*) filter (where status = 'succeeded')::int as succeeded,
      coalesce(sum(greatest(attempts - 1, 0)), 0)::int as restarted,
      coalesce(sum(greatest(dispatch_count - 1, 0)), 0)::int as redispatches
    from task_steps where tenant_id = ${tenantId}`;
  assert.ok(steps);
  assert.equal(steps.total, tasks * STEPS_PER_TASK, 'one row per step, none added twice');
  assert.equal(steps.succeeded, steps.total, 'every step succeeded');
  const events = await handle.sql<{ type: string; n: number }[]>`
    select type, count(*)::int as n from task_events
    where tenant_id = ${tenantId} and type in ('step_succeeded', 'step_failed', 'step_redispatched')
    group by type`;
  const eventCount = (type: string) => events.find((e) => e.type === type)?.n ?? 0;
  assert.equal(eventCount('step_succeeded'), tasks * STEPS_PER_TASK, "each step's success once");
  assert.equal(eventCount('step_failed'), 0, 'no step failed');
  const [duplicates] = await handle.sql<{ n: number }[]>`
    select count(*)::int as n from (
      select task_id, data->>'seq' from task_events
      where tenant_id = ${tenantId} and type = 'step_succeeded'
      group by task_id, data->>'seq' having count(*) > 1) d`;
  assert.equal(duplicates?.n, 0, 'no step sequence has two recorded successes');
  return {
    restartedSteps: steps.restarted,
    redispatches: steps.redispatches,
    redispatchEvents: eventCount('step_redispatched'),
  };
}

/**
 * Waits for the moment of a kill: until `atLeast` steps of the tenant succeeded (polled calmly, so
 * kills spread over the run), then until `moment` finds what the kill must land in (polled every
 * `everyMs`, to hit a window of milliseconds). Resolves `over` when every step succeeded first.
 */
async function killMoment<T>(
  tenantId: string,
  totalSteps: number,
  atLeast: number,
  moment: () => Promise<T | undefined>,
  what: string,
  everyMs: number,
): Promise<T | 'over'> {
  const target = Math.min(atLeast, totalSteps);
  const done = await eventually(
    async () => {
      const succeeded = await succeededSteps(tenantId);
      return succeeded >= target ? succeeded : undefined;
    },
    `${target} steps succeeded`,
    FINISH_DEADLINE_MS,
    100,
  );
  if (done >= totalSteps) return 'over';
  let probes = 0;
  return eventually<T | 'over'>(
    async () => {
      const found = await moment();
      if (found !== undefined) return found;
      probes += 1;
      if (probes % 100 === 0 && (await succeededSteps(tenantId)) >= totalSteps) return 'over';
      return undefined;
    },
    what,
    MOMENT_DEADLINE_MS,
    everyMs,
  );
}

/** Postgres's clock now, to compare with timestamps it wrote. */
async function databaseNow(): Promise<Date> {
  const [row] = await handle.sql<{ now: Date }[]>`select now() as now`;
  assert.ok(row);
  return row.now;
}

async function sigkill(service: ServiceProcess): Promise<void> {
  service.kill('SIGKILL');
  const exit = await service.exited;
  assert.equal(exit.signal, 'SIGKILL', `${service.options.name} died of SIGKILL`);
}

/** How `service` exited, or undefined when it still runs after `timeoutMs`. */
async function exitWithin(service: ServiceProcess, timeoutMs: number) {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), timeoutMs);
  });
  try {
    return await Promise.race([service.exited, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** One diagnostic line of a scenario's figures (names printed in snake_case). */
function report(t: TestContext, scenario: string, figures: Record<string, number | string>) {
  t.diagnostic(
    `${scenario}: ${Object.entries(figures)
      .map(([name, value]) => `${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}=${value}`)
      .join(' ')}`,
  );
}

describe('processes killed with SIGKILL during a run', () => {
  it('executors killed mid-step again and again: every task finishes, each success once', async (t) => {
    const tenantId = 'executor-kills';
    const { client } = await scenarioTenant(tenantId);
    const started = Date.now();
    try {
      await createTasks(client, 'exec', SCALE);
      const createMs = Date.now() - started;
      const totalSteps = SCALE * STEPS_PER_TASK;
      // Kills spread over the run: each waits for this much progress after the one before.
      const progressBetweenKills = Math.floor(totalSteps / (EXECUTOR_KILLS + 2));
      const current = new Map<string, ServiceProcess>(
        CHAOS_RESOURCES.map((resource) => {
          const executor = e2e.stack.executors.get(resource);
          assert.ok(executor, `an executor of ${resource} runs`);
          return [resource, executor];
        }),
      );
      const since = new Map<string, Date>();
      for (const resource of CHAOS_RESOURCES) since.set(resource, await databaseNow());
      let kills = 0;
      /** Steps seen running on the victims just before they were killed. */
      let runningAtKills = 0;
      let succeededAtLastKill = 0;
      for (let round = 0; round < EXECUTOR_KILLS; round += 1) {
        const resource = CHAOS_RESOURCES[round % CHAOS_RESOURCES.length] as string;
        const victim = current.get(resource);
        assert.ok(victim);
        // The moment: enough progress since the last kill, and a step running on the victim.
        const moment = await killMoment(
          tenantId,
          totalSteps,
          succeededAtLastKill + progressBetweenKills,
          async () => {
            const [row] = await handle.sql<{ n: number }[]>`
              select count(*)::int as n from task_steps
              where tenant_id = ${tenantId} and resource = ${resource} and status = 'running'
                and started_at >= ${since.get(resource) ?? new Date(0)}`;
            return (row?.n ?? 0) > 0 ? (row?.n ?? 0) : undefined;
          },
          `a step runs on ${victim.options.name}`,
          10,
        );
        if (moment === 'over') break;
        await sigkill(victim);
        kills += 1;
        runningAtKills += moment;
        succeededAtLastKill = await succeededSteps(tenantId);
        since.set(resource, await databaseNow());
        current.set(resource, await e2e.stack.startExecutor(resource));
      }
      await waitUntilAllFinal(tenantId, SCALE);
      const wallMs = Date.now() - started;
      const figures = await assertAllSucceeded(tenantId, SCALE);
      report(t, 'executor kills', {
        tasks: SCALE,
        wall_ms: wallMs,
        create_ms: createMs,
        kills,
        steps_running_at_kills: runningAtKills,
        ...figures,
      });
      assert.ok(kills >= 2, `at least two executors were killed mid-step (${kills})`);
      assert.ok(figures.restartedSteps >= 1, 'a step a killed executor ran was taken over');
    } finally {
      client.close();
    }
  });

  it('the scheduler killed while it dispatches: every task finishes, each success once', async (t) => {
    const tenantId = 'scheduler-kills';
    const { client } = await scenarioTenant(tenantId);
    const started = Date.now();
    try {
      await createTasks(client, 'sched', SCALE);
      const createMs = Date.now() - started;
      const totalSteps = SCALE * STEPS_PER_TASK;
      const progressBetweenKills = Math.floor(totalSteps / (SCHEDULER_KILLS + 2));
      let scheduler = e2e.stack.all.filter((p) => p.options.service === 'scheduler' && p.running);
      assert.equal(scheduler.length, 1, 'one scheduler runs');
      let victim = scheduler[0] as ServiceProcess;
      let kills = 0;
      let inClaimWindow = 0;
      let orphanedClaims = 0;
      let succeededAtLastKill = 0;
      for (let round = 0; round < SCHEDULER_KILLS; round += 1) {
        // The moment: enough progress since the last kill, and a claim committed whose
        // publication is not recorded yet (the dispatcher is between claim and publish).
        const moment = await killMoment(
          tenantId,
          totalSteps,
          succeededAtLastKill + progressBetweenKills,
          async () => {
            const [row] = await handle.sql<{ claimed: boolean }[]>`
              select exists (select 1 from task_steps
                where tenant_id = ${tenantId} and status = 'dispatched' and publish_seq is null
              ) as claimed`;
            return row?.claimed ? 'claiming' : undefined;
          },
          `${victim.options.name} claims steps`,
          2,
        );
        if (moment === 'over') break;
        await sigkill(victim);
        kills += 1;
        const [orphans] = await handle.sql<{ n: number }[]>`
          select count(*)::int as n from task_steps
          where tenant_id = ${tenantId} and status = 'dispatched' and publish_seq is null`;
        if ((orphans?.n ?? 0) > 0) inClaimWindow += 1;
        orphanedClaims += orphans?.n ?? 0;
        succeededAtLastKill = await succeededSteps(tenantId);
        victim = await e2e.stack.startScheduler();
      }
      await waitUntilAllFinal(tenantId, SCALE);
      const wallMs = Date.now() - started;
      const figures = await assertAllSucceeded(tenantId, SCALE);
      report(t, 'scheduler kills', {
        tasks: SCALE,
        wall_ms: wallMs,
        create_ms: createMs,
        kills,
        kills_with_claims_unpublished: inClaimWindow,
        claims_unpublished_at_kill: orphanedClaims,
        ...figures,
      });
      assert.ok(kills >= 2, `the scheduler was killed during dispatch at least twice (${kills})`);
      scheduler = e2e.stack.all.filter((p) => p.options.service === 'scheduler' && p.running);
      assert.equal(scheduler.length, 1, 'one scheduler runs at the end');
    } finally {
      client.close();
    }
  });

  it('the gateway killed between commit and answer: a retry with the key finds the task', async (t) => {
    const tenantId = 'gateway-kills';
    const { client, apiKey } = await scenarioTenant(tenantId);
    const started = Date.now();
    try {
      const perCrash = Math.ceil(SCALE / GATEWAY_CRASHES);
      // Every gateway gets at least one create (a small scale may need fewer than GATEWAY_CRASHES).
      const rounds = Math.ceil(SCALE / perCrash);
      const codes = new Map<number, number>();
      let crashes = 0;
      // All the faulty gateways start at once (starting one is the slow part); each then dies at
      // the first commit of its own burst of concurrent creates.
      const gateways = Array.from(
        { length: rounds },
        (_, round) =>
          new ServiceProcess({
            name: `gateway-faulty-${round}`,
            service: 'gateway',
            env: {
              NATS_URL: natsUrl(),
              DATABASE_URL: e2e.database.url,
              SLUICE_PREFIX: e2e.prefix,
              SLUICE_LOG_LEVEL: 'info',
              SLUICE_GRPC_PORT: '0',
              SLUICE_FAULT_INJECTION: 'crash_after_create_commit',
            },
          }),
      );
      try {
        const ports = await Promise.all(
          gateways.map(async (gateway) => {
            const ready = await gateway.waitForMessage('gateway started', 90_000);
            const port = ready['grpc_port'];
            assert.equal(typeof port, 'number', 'the gateway reports its port');
            return String(port);
          }),
        );
        for (const [round, gateway] of gateways.entries()) {
          const first = round * perCrash;
          const count = Math.min(perCrash, SCALE - first);
          const crashing = createTaskClient({ address: `127.0.0.1:${ports[round]}`, apiKey });
          try {
            const results = await Promise.allSettled(
              Array.from({ length: count }, (_, i) =>
                crashing.createTask(taskParams('gw', first + i)),
              ),
            );
            for (const result of results) {
              assert.equal(
                result.status,
                'rejected',
                'no create is answered by the crashing gateway',
              );
              const error: unknown = result.reason;
              assert.ok(isServiceError(error), `a gRPC error, not ${String(error)}`);
              codes.set(error.code, (codes.get(error.code) ?? 0) + 1);
            }
          } finally {
            crashing.close();
          }
          const exit = await exitWithin(gateway, 30_000);
          assert.equal(exit?.signal, 'SIGKILL', `${gateway.options.name} killed itself`);
          crashes += 1;
        }
      } finally {
        await Promise.all(gateways.map((gateway) => gateway.stop()));
      }
      assert.deepEqual(
        [...codes.keys()],
        [grpcStatus.UNAVAILABLE],
        `every client saw UNAVAILABLE: ${JSON.stringify([...codes])}`,
      );

      // Some creates committed before their gateway died: the retry must find exactly those.
      const committed = new Map(
        (
          await handle.sql<{ id: string; idempotency_key: string }[]>`
            select id, idempotency_key from tasks where tenant_id = ${tenantId}`
        ).map((row) => [row.idempotency_key, row.id]),
      );
      assert.ok(
        committed.size >= crashes,
        `each gateway died after a commit: ${committed.size} tasks for ${crashes} crashes`,
      );

      // The client retries every create with its key against a gateway without the fault.
      let found = 0;
      let createdOnRetry = 0;
      await Promise.all(
        Array.from({ length: CREATE_CONCURRENCY }, async (_, worker) => {
          for (let index = worker; index < SCALE; index += CREATE_CONCURRENCY) {
            const params = taskParams('gw', index);
            const { task, created, calls } = await createWithRetry(client, params);
            const earlier = committed.get(params.idempotencyKey);
            if (earlier === undefined) {
              // Created by this call, or by an earlier call of it that timed out after its commit.
              assert.ok(created || calls > 1, `${params.idempotencyKey} was absent: created now`);
              createdOnRetry += 1;
            } else {
              assert.equal(created, false, `${params.idempotencyKey} existed: not created again`);
              assert.equal(task.task_id, earlier, `${params.idempotencyKey} finds the same task`);
              found += 1;
            }
          }
        }),
      );
      await waitUntilAllFinal(tenantId, SCALE);
      const wallMs = Date.now() - started;
      const figures = await assertAllSucceeded(tenantId, SCALE);
      report(t, 'gateway kills', {
        tasks: SCALE,
        wall_ms: wallMs,
        kills: crashes,
        committed_before_crash: found,
        created_on_retry: createdOnRetry,
        ...figures,
      });
      assert.equal(found + createdOnRetry, SCALE);
    } finally {
      client.close();
    }
  });

  it('the gateway refuses an unknown fault at start (exit code 2)', async () => {
    const gateway = new ServiceProcess({
      name: 'gateway-bad-fault',
      service: 'gateway',
      env: {
        NATS_URL: natsUrl(),
        DATABASE_URL: e2e.database.url,
        SLUICE_PREFIX: e2e.prefix,
        SLUICE_GRPC_PORT: '0',
        SLUICE_FAULT_INJECTION: 'crash_sometimes',
      },
    });
    const exit = await exitWithin(gateway, 30_000);
    await gateway.stop();
    assert.equal(exit?.code, 2, 'a configuration error');
    assert.match(gateway.stderr.join('\n'), /SLUICE_FAULT_INJECTION/);
    assert.equal(gateway.lines.length, 0, 'nothing started');
  });
});

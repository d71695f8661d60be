/**
 * Tenant limits and fairness in the whole stack (issue 5): two schedulers and two executors of
 * `tool:count`, with far more executor slots than any limit, so what bounds the calls the fake tool
 * sees at once is admission alone. Each tenant creates its own `bp-count` tasks (one call of the
 * tool, tagged with the tenant), and the tool counts calls in flight and successes per tenant.
 *
 * Every scenario first closes the resource (limit 0), creates all its tasks, then opens it: the
 * backlogs are all ready when admission starts, the flooding tenant's oldest, so a FIFO queue would
 * serve the flood first and the assertions below would fail.
 *
 * Counts, not timings: maxima and shares of calls, waits on conditions only.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { createApiKey, createTenant, setResourceLimit, setTenantLimit } from '@sluice/db';
import { createTaskClient, type TaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeToolServer, type FakeToolServer } from '../support/fake-tool-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { testScale } from '../support/test-scale.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'backpressure-task-types.ts',
);
const RESOURCE = 'tool:count';
/** Far above every limit below: executors never bound the calls in flight. */
const SLOTS_PER_EXECUTOR = 16;
/** Long enough that the calls admitted together overlap at the tool. */
const TOOL_LATENCY_MS = 150;
/**
 * Where a test asserts that a limit is reached at the tool itself: executors pull one message at a
 * time, so the calls of one claim reach the tool spread out; held this long they all overlap even
 * on a loaded machine.
 */
const REACH_LATENCY_MS = 400;
/**
 * Tasks per scenario: the default keeps `npm test` short; SLUICE_TEST_SCALE raises it (the test
 * scale's own default, 120, is meant for the fault scenarios, so it is divided here).
 */
const SCALE = Math.max(60, Math.round(testScale() / 2));
/**
 * Every task is created at P0. Aging ranks a step by its effective priority before the tenant
 * shares, so below P0 a flood waiting one aging interval (30 s) longer than another tenant's work
 * is admitted ahead of all of it; P0 cannot be raised, so here the order between tenants is the
 * fairness rule alone, however long the flood waits (and whatever SLUICE_TEST_SCALE is).
 */
const PRIORITY = 'PRIORITY_P0';
const TIMEOUT_MS = 120_000;

let e2e: E2eStack;
let tool: FakeToolServer;
const clients: TaskClient[] = [];

before(async () => {
  tool = await startFakeToolServer({ latencyMs: TOOL_LATENCY_MS });
  e2e = await startE2eStack({
    label: 'fairness',
    maxConnections: 4,
    resources: [RESOURCE],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_TOOL_URL: tool.baseUrl,
      SLUICE_EXECUTOR_SLOTS: String(SLOTS_PER_EXECUTOR),
      SLUICE_SCHEDULER_POLL_MS: '50',
    },
  });
  await e2e.stack.startScheduler();
  await e2e.stack.startExecutor(RESOURCE);
});

after(async () => {
  for (const client of clients) client.close();
  await e2e?.stop();
  await tool?.stop();
});

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = TIMEOUT_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A new tenant with its own API key and client (closed after the file). */
async function tenantClient(tenantId: string): Promise<TaskClient> {
  await createTenant(e2e.handle.db, { id: tenantId });
  const apiKey = await createApiKey(e2e.handle.db, { tenantId });
  const client = createTaskClient({ address: e2e.stack.grpcAddress, apiKey });
  clients.push(client);
  return client;
}

/** Creates `count` `bp-count` tasks of the client's tenant, a few at a time; returns their ids. */
async function createTasks(client: TaskClient, count: number, label: string): Promise<string[]> {
  const ids: string[] = [];
  const chunk = 10;
  for (let start = 0; start < count; start += chunk) {
    const created = await Promise.all(
      Array.from({ length: Math.min(chunk, count - start) }, (_, offset) =>
        client.createTask({
          type: 'bp-count',
          priority: PRIORITY,
          input: { label: `${label}-${start + offset}` },
        }),
      ),
    );
    ids.push(...created.map(({ task }) => task.task_id));
  }
  return ids;
}

/** Statuses of the tenant's tasks, counted. */
async function taskStatuses(tenantId: string): Promise<Map<string, number>> {
  const rows = await e2e.handle.sql<Array<{ status: string; n: number }>>`
    select status, count(*)::int as n from tasks where tenant_id = ${tenantId} group by status
  `;
  return new Map(rows.map((row) => [row.status, row.n]));
}

/** The most steps in flight seen in the step rows while waiting, per tenant and in all. */
interface InFlightPeaks {
  readonly total: number;
  readonly byTenant: ReadonlyMap<string, number>;
}

/**
 * Waits until each tenant's `count` tasks have all succeeded (and fails if any ends otherwise),
 * sampling the steps in flight on the way.
 */
async function allSucceed(expected: Record<string, number>): Promise<InFlightPeaks> {
  const tenantIds = Object.keys(expected);
  let total = 0;
  const byTenant = new Map<string, number>();
  await eventually(
    async () => {
      const counts = await stepCounts(tenantIds);
      let sum = 0;
      for (const [tenantId, { inFlight }] of counts) {
        sum += inFlight;
        byTenant.set(tenantId, Math.max(byTenant.get(tenantId) ?? 0, inFlight));
      }
      total = Math.max(total, sum);
      for (const [tenantId, count] of Object.entries(expected)) {
        const statuses = await taskStatuses(tenantId);
        for (const final of ['failed_terminal', 'cancelled']) {
          assert.equal(statuses.get(final) ?? 0, 0, `no task of ${tenantId} ends ${final}`);
        }
        if ((statuses.get('succeeded') ?? 0) !== count) return undefined;
      }
      return true;
    },
    `the tasks of ${tenantIds.join(', ')} succeed`,
  );
  return { total, byTenant };
}

/** One consistent reading of a tenant's steps on the resource: waiting and in flight. */
interface StepCounts {
  readonly ready: number;
  readonly inFlight: number;
}

async function stepCounts(tenantIds: readonly string[]): Promise<Map<string, StepCounts>> {
  const rows = await e2e.handle.sql<Array<{ tenant_id: string; ready: number; in_flight: number }>>`
    select tenant_id,
      count(*) filter (where status = 'ready' and due_at <= now())::int as ready,
      count(*) filter (where status in ('dispatched', 'running'))::int as in_flight
    from task_steps
    where resource = ${RESOURCE} and tenant_id in ${e2e.handle.sql(tenantIds)}
    group by tenant_id
  `;
  const counts = new Map<string, StepCounts>();
  for (const id of tenantIds) counts.set(id, { ready: 0, inFlight: 0 });
  for (const row of rows) counts.set(row.tenant_id, { ready: row.ready, inFlight: row.in_flight });
  return counts;
}

/** What happened on the resource while a tenant had steps waiting, against another tenant. */
interface Contention {
  /** Successful calls of the tenant, and of the other one, when its last step was admitted. */
  readonly mine: number;
  readonly theirs: number;
  /** The most steps of each in flight in any snapshot taken while the tenant had steps waiting. */
  readonly mostMineInFlight: number;
  readonly mostTheirsInFlight: number;
}

/**
 * Samples the step rows until `tenant` has no step waiting any more (all admitted), checking that
 * `other` had work waiting all along (so the period was contended), and returns the successful
 * calls of both at that moment.
 */
async function whileWaiting(tenant: string, other: string): Promise<Contention> {
  let samples = 0;
  let mostMineInFlight = 0;
  let mostTheirsInFlight = 0;
  await eventually(async () => {
    const counts = await stepCounts([tenant, other]);
    const mine = counts.get(tenant) as StepCounts;
    const theirs = counts.get(other) as StepCounts;
    if (mine.ready === 0) return samples > 0 ? true : undefined;
    samples += 1;
    assert.ok(theirs.ready > 0, `${other} still had work waiting while ${tenant} had`);
    mostMineInFlight = Math.max(mostMineInFlight, mine.inFlight);
    mostTheirsInFlight = Math.max(mostTheirsInFlight, theirs.inFlight);
    return undefined;
  }, `every step of ${tenant} is admitted`);
  const contended = {
    mine: tool.successesOf(tenant),
    theirs: tool.successesOf(other),
    mostMineInFlight,
    mostTheirsInFlight,
  };
  assert.ok(samples >= 5, `${tenant} had work waiting in ${samples} samples`);
  assert.ok(contended.mine > 0, `some calls of ${tenant} succeeded while it had work waiting`);
  return contended;
}

function percent(share: number): string {
  return `${(share * 100).toFixed(0)} %`;
}

describe('tenant limits and fairness across replicas', () => {
  it('holds the resource limit and a tenant cap, and reaches both', async () => {
    const limit = 6;
    const cap = 2;
    const [a, b] = ['limits-a', 'limits-b'];
    await setResourceLimit(e2e.handle.db, RESOURCE, 0);
    await setTenantLimit(e2e.handle.db, { tenantId: a, resource: RESOURCE, floor: 0, cap });
    const clientA = await tenantClient(a);
    const clientB = await tenantClient(b);
    const perTenant = Math.round(SCALE / 2);
    await createTasks(clientA, perTenant, a);
    await createTasks(clientB, perTenant, b);
    tool.resetPeaks();
    tool.setLatency(REACH_LATENCY_MS);
    const callsBefore = tool.calls;
    await setResourceLimit(e2e.handle.db, RESOURCE, limit);

    const peaks = await allSucceed({ [a]: perTenant, [b]: perTenant });
    tool.setLatency(TOOL_LATENCY_MS);
    assert.equal(peaks.total, limit, `at most ${limit} steps in flight, and the limit reached`);
    assert.equal(peaks.byTenant.get(a), cap, `at most ${cap} steps of ${a}, and its cap reached`);
    assert.equal(tool.calls - callsBefore, 2 * perTenant, 'one call per task');
    assert.equal(tool.maxInFlight, limit, `at most ${limit} calls at once, and the limit reached`);
    assert.equal(tool.maxInFlightOf(a), cap, `at most ${cap} calls of ${a}, and its cap reached`);
    assert.ok(
      tool.maxInFlightOf(b) >= limit - cap,
      `${b} used the room ${a}'s cap left (${tool.maxInFlightOf(b)})`,
    );
    assert.equal(tool.successesOf(a), perTenant);
    assert.equal(tool.successesOf(b), perTenant);
  });

  it('shares a priority between tenants: a moderate tenant is not starved behind a flood', async () => {
    const limit = 6;
    const [a, b] = ['fair-a', 'fair-b'];
    await setResourceLimit(e2e.handle.db, RESOURCE, 0);
    const clientA = await tenantClient(a);
    const clientB = await tenantClient(b);
    const flood = SCALE * 2;
    const moderate = Math.round(SCALE / 2);
    // The flood is created first, so all of it is older than any of B's tasks.
    await createTasks(clientA, flood, a);
    await createTasks(clientB, moderate, b);
    await setResourceLimit(e2e.handle.db, RESOURCE, limit);

    const contended = await whileWaiting(b, a);
    // Water-filling: while B has work waiting, each tenant holds at most an even share of the
    // limit, and B gets its share.
    assert.ok(
      contended.mostTheirsInFlight <= limit / 2,
      `${a} held ${contended.mostTheirsInFlight} of ${limit} slots while ${b} waited`,
    );
    assert.ok(
      contended.mostMineInFlight >= limit / 2,
      `${b} reached its even share in flight (${contended.mostMineInFlight})`,
    );
    const share = contended.mine / (contended.mine + contended.theirs);
    // Fair sharing gives B about half of the calls; FIFO none until the flood is drained.
    assert.ok(
      share >= 0.4,
      `${b} got ${percent(share)} of the calls while it had work waiting (${contended.mine} against ${contended.theirs})`,
    );
    await allSucceed({ [a]: flood, [b]: moderate });
    assert.equal(tool.successesOf(a), flood);
    assert.equal(tool.successesOf(b), moderate);
  });

  it('keeps a tenant floor under contention and its cap alone', async () => {
    const contendedLimit = 4;
    const floor = 3;
    const cap = 5;
    const [c, f] = ['floor-c', 'floor-flood'];
    await setResourceLimit(e2e.handle.db, RESOURCE, 0);
    await setTenantLimit(e2e.handle.db, { tenantId: c, resource: RESOURCE, floor, cap });
    const clientC = await tenantClient(c);
    const clientF = await tenantClient(f);
    const flood = SCALE * 2;
    const moderate = Math.round(SCALE / 2);
    await createTasks(clientF, flood, f);
    await createTasks(clientC, moderate, c);
    tool.resetPeaks();
    await setResourceLimit(e2e.handle.db, RESOURCE, contendedLimit);

    const contended = await whileWaiting(c, f);
    // While C has work waiting the flood never takes a slot of C's floor: at most limit − floor of
    // its steps are in flight in any snapshot of the step rows.
    assert.ok(
      contended.mostTheirsInFlight <= contendedLimit - floor,
      `${f} held ${contended.mostTheirsInFlight} slots while ${c} waited`,
    );
    assert.ok(contended.mostMineInFlight >= floor, `${c} reached its floor in flight`);
    assert.ok(
      tool.maxInFlightOf(c) >= floor,
      `${c} had its floor of calls at once at the tool (${tool.maxInFlightOf(c)})`,
    );
    assert.ok(tool.maxInFlight <= contendedLimit, `the resource limit held (${tool.maxInFlight})`);
    // With its floor C gets about floor / limit (3/4) of the calls; an even split would be 1/2.
    const share = contended.mine / (contended.mine + contended.theirs);
    assert.ok(
      share >= 0.6,
      `${c} got ${percent(share)} of the calls while it had work waiting (${contended.mine} against ${contended.theirs})`,
    );
    await allSucceed({ [c]: moderate, [f]: flood });

    // Alone, with room above its cap, C runs up to its cap and no further.
    await setResourceLimit(e2e.handle.db, RESOURCE, 0);
    const alone = Math.max(moderate, 4 * cap);
    await createTasks(clientC, alone, `${c}-alone`);
    tool.resetPeaks();
    tool.setLatency(REACH_LATENCY_MS);
    await setResourceLimit(e2e.handle.db, RESOURCE, cap + 3);
    const peaks = await allSucceed({ [c]: moderate + alone });
    tool.setLatency(TOOL_LATENCY_MS);
    assert.equal(peaks.byTenant.get(c), cap, `${c} alone: at most its cap in flight, and reached`);
    assert.equal(tool.maxInFlightOf(c), cap, `${c} alone: at most its cap at once, and reached`);
    assert.equal(tool.maxInFlight, cap, 'nothing else ran');

    await assertDatabaseInvariants(e2e.handle, { requireFinal: true });
  });
});

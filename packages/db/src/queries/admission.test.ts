/**
 * Admission against a real Postgres: resource limits and tenant caps that hold with concurrent
 * claimers, floors and caps under contention and alone, priority order when capacity is short, and
 * aging (time is controlled through `due_at`, never by sleeping).
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import { openDatabase, type DatabaseHandle } from '../client.js';
import {
  oneStepManifest,
  openTaskTypeDatabase,
  startTurnCounter,
  type TaskTypeDatabase,
} from '../testing/index.js';
import { createTask } from './tasks.js';
import { KeptConnection } from '../kept-connection.js';
import { rowsOf } from '../one-write.js';
import {
  claimAdmission,
  claimAdmissionOn,
  claimReadySteps,
  type AdmissionSettings,
  type ClaimedStep,
} from './claim.js';
import { clearTenantLimit, lockAdmission, setResourceLimit, setTenantLimit } from './admission.js';

const manifest = oneStepManifest();

const settings: AdmissionSettings = { defaultResourceLimit: 64, agingMs: 30_000 };

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let made = 0;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme', 'globex'],
    manifests: [manifest],
    max: 10,
  });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** The claimed steps of `resource` (other tests' resources share the database). */
function claimedOn(resource: string, claimed: readonly ClaimedStep[]): ClaimedStep[] {
  return claimed.filter((c) => c.resource === resource);
}

/** Makes `count` ready steps of `resource`, due `dueAgoMs` ago; returns their ids in order. */
async function makeSteps(
  resource: string,
  tenantId: string,
  priority: Priority,
  count: number,
  dueAgoMs = 0,
): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const { task } = await createTask(handle.db, {
      tenantId,
      taskType: manifest,
      priority,
      input: { n: made++ },
    });
    const rows = await handle.db.execute<{ id: string }>(sql`
      update task_steps set resource = ${resource},
        due_at = now() - make_interval(secs => ${dueAgoMs / 1_000})
      where task_id = ${task.id} returning id
    `);
    ids.push(Number(rows[0]?.id));
  }
  return ids;
}

function claim(limit: number, admission: AdmissionSettings = settings): Promise<ClaimedStep[]> {
  return handle.db.transaction((tx) => claimReadySteps(tx, limit, admission));
}

async function finish(ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await handle.db.execute(sql`
    update task_steps set status = 'succeeded', finished_at = now()
    where id in (${sql.join(
      ids.map((id) => sql`${id}`),
      sql`, `,
    )})
  `);
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

describe('admission limits', () => {
  it('holds the resource limit and a tenant cap with three concurrent claimers', async () => {
    const resource = 'race:a';
    const initial = 60;
    const arriving = 120;
    const total = initial + arriving;
    await setResourceLimit(handle.db, resource, 5);
    await setTenantLimit(handle.db, { tenantId: 'acme', resource, floor: 0, cap: 3 });
    await makeSteps(resource, 'acme', 2, initial / 2);
    await makeSteps(resource, 'globex', 2, initial / 2);
    let maxInFlight = 0;
    let maxAcme = 0;
    let finished = 0;
    const deadline = Date.now() + 120_000;
    const running = () => finished < total && Date.now() < deadline;
    // Three claimers of different batch sizes, while urgent work keeps arriving and steps finish: the
    // order of the ready queue changes between their snapshots, the case a lock-free claim gets
    // wrong.
    // makeSteps creates each step in the task type's resource and then moves it here: a claimer
    // that took it in between would bring a dispatched step into this resource past its
    // admission (6 in flight, one CI run in many). The claimers leave that resource alone.
    const claimerSettings: AdmissionSettings = {
      ...settings,
      closedResources: [manifest.steps[0]!.resource],
    };
    const claimer = async (batch: number) => {
      while (running()) {
        await handle.db.transaction(async (tx) => {
          await claimReadySteps(tx, batch, claimerSettings);
          // Still under the admission lock: the count after this claim, which no claim can raise.
          const [row] = await tx.execute<{ all: number; acme: number }>(sql`
            select count(*)::int as all, (count(*) filter (where tenant_id = 'acme'))::int as acme
            from task_steps where resource = ${resource} and status in ('dispatched', 'running')
          `);
          maxInFlight = Math.max(maxInFlight, row?.all ?? 0);
          maxAcme = Math.max(maxAcme, row?.acme ?? 0);
        });
        await nextTurn();
      }
    };
    const producer = async () => {
      for (let i = 0; i < arriving && running(); i++) {
        await makeSteps(resource, i % 2 === 0 ? 'acme' : 'globex', 0, 1);
        await nextTurn();
      }
    };
    const finisher = async () => {
      while (running()) {
        const done = await handle.db.execute<{ id: string }>(sql`
          update task_steps set status = 'succeeded', finished_at = now()
          where id = (
            select id from task_steps
            where resource = ${resource} and status in ('dispatched', 'running')
            order by random() limit 1
          )
          returning id
        `);
        finished += done.length;
        await nextTurn();
      }
    };
    await Promise.all([claimer(2), claimer(3), claimer(5), producer(), finisher()]);
    assert.equal(finished, total, 'every step was admitted and finished');
    assert.equal(maxInFlight, 5, 'the resource limit was reached and never exceeded');
    assert.ok(maxAcme <= 3, `acme's cap held (saw ${maxAcme})`);
    assert.ok(maxAcme >= 1);
  });

  it('gives each tenant its floor under contention and up to its cap alone', async () => {
    const resource = 'share:b';
    await setResourceLimit(handle.db, resource, 10);
    await setTenantLimit(handle.db, { tenantId: 'acme', resource, floor: 5, cap: 20 });
    await setTenantLimit(handle.db, { tenantId: 'globex', resource, floor: 5, cap: 20 });
    // globex floods first: its steps are older and more numerous.
    const flood = await makeSteps(resource, 'globex', 2, 30, 1_000);
    const mine = await makeSteps(resource, 'acme', 2, 25);
    const contended = await claim(100);
    assert.deepEqual(
      countBy(contended, (s) => s.tenantId),
      { acme: 5, globex: 5 },
    );

    // Alone (globex's work is gone), acme may burst up to its cap: 20, within a larger limit.
    await setResourceLimit(handle.db, resource, 30);
    await finish(contended.filter((s) => s.tenantId === 'globex').map((s) => s.id));
    await handle.db.execute(sql`
      update task_steps set status = 'cancelled'
      where status = 'ready' and id in (${sql.join(
        flood.map((id) => sql`${id}`),
        sql`, `,
      )})
    `);
    const alone = await claim(100);
    assert.deepEqual(
      countBy(alone, (s) => s.tenantId),
      { acme: 15 },
      '5 in flight + 15 = cap',
    );
    assert.deepEqual(await claim(100), [], 'at its cap, nothing more');
    assert.equal(mine.length - 20, 5, 'five of acme stay ready');
  });

  it('admits a tenant under its floor before any tenant at or over its floor', async () => {
    const resource = 'floor:c';
    await setResourceLimit(handle.db, resource, 3);
    await setTenantLimit(handle.db, { tenantId: 'acme', resource, floor: 3, cap: null });
    await makeSteps(resource, 'globex', 1, 5, 5_000);
    await makeSteps(resource, 'acme', 1, 5);
    const claimed = await claim(100);
    assert.deepEqual(
      countBy(claimed, (s) => s.tenantId),
      { acme: 3 },
    );
    await clearTenantLimit(handle.db, 'acme', resource);
  });

  it('shares a priority evenly between tenants without floors', async () => {
    const resource = 'even:d';
    await setResourceLimit(handle.db, resource, 6);
    await makeSteps(resource, 'globex', 1, 10, 5_000);
    await makeSteps(resource, 'acme', 1, 10);
    const claimed = await claim(100);
    assert.deepEqual(
      countBy(claimed, (s) => s.tenantId),
      { acme: 3, globex: 3 },
    );
  });
});

describe('admission lock', () => {
  /**
   * How a claim now would see `resource`: locked to count and claim in (`open`), passed over for
   * want of room (`full`), or not at all (no due ready steps).
   */
  const seen = async (
    resource: string,
    admission: AdmissionSettings = settings,
  ): Promise<'open' | 'full' | 'unseen'> => {
    const lock = await handle.db.transaction((tx) => lockAdmission(tx, admission));
    const open = lock.open.includes(resource);
    const full = lock.full.includes(resource);
    assert.ok(!(open && full), `${resource} both open and full`);
    return open ? 'open' : full ? 'full' : 'unseen';
  };

  it('passes over a full resource (no claim for it) until one of its steps finishes', async () => {
    const resource = 'tool:full';
    assert.equal(await seen(resource), 'unseen', 'no ready steps');
    await setResourceLimit(handle.db, resource, 2);
    await makeSteps(resource, 'acme', 2, 4);
    assert.equal(await seen(resource), 'open', 'ready steps and room');
    const claimed = await claim(10);
    assert.equal(countBy(claimed, (c) => c.resource)[resource], 2);
    assert.equal(await seen(resource), 'full', 'two in flight, limit two');
    assert.deepEqual(claimedOn(resource, await claim(10)), []);
    await finish([(claimed.find((c) => c.resource === resource) as ClaimedStep).id]);
    assert.equal(await seen(resource), 'open', 'a slot is free again');
    assert.equal(
      await seen(resource, { ...settings, resourceLimits: { [resource]: 1 } }),
      'full',
      'the governor’s lower limit counts too',
    );
    assert.equal(countBy(await claim(10), (c) => c.resource)[resource], 1);
  });

  it('claims in two round trips: BEGIN, the lock and the claim together, then COMMIT', async () => {
    const resource = 'tool:round-trips';
    const proxy = await startTurnCounter(fixture.database.url);
    const through = openDatabase(proxy.url, { max: 1 });
    try {
      // Once to prepare the statements on the connection (the first use of a statement with
      // parameters asks Postgres for their types first).
      await through.db.transaction((tx) => claimAdmission(tx, 10, settings));
      const ids = await makeSteps(resource, 'acme', 2, 2);
      proxy.reset();
      const { steps } = await through.db.transaction((tx) => claimAdmission(tx, 10, settings));
      assert.deepEqual(
        claimedOn(resource, steps)
          .map((c) => c.id)
          .sort(),
        [...ids].sort(),
      );
      assert.equal(proxy.turns(), 2);
    } finally {
      await through.close();
      await proxy.close();
    }
  });

  it('plans the claim once per connection, in the pool and on a kept connection', async () => {
    // Planned for its values, the claim was planned again at almost every call (its generic plan
    // looks costlier than the custom ones), which cost as much as running it.
    await makeSteps('tool:planned-once', 'acme', 2, 2);
    const plansOfClaim = sql`
      select custom_plans::int as custom, generic_plans::int as generic
      from pg_prepared_statements
      where statement like '%-- Every (resource, tenant, priority)%'
        and statement not like '%pg_prepared_statements%'`;
    // One connection, so the statements prepared in the pool and the kept one are the same.
    const single = openDatabase(fixture.database.url, { max: 1 });
    const kept = new KeptConnection(single.db);
    try {
      for (let call = 0; call < 8; call += 1) {
        await single.db.transaction((tx) => claimAdmission(tx, 1, settings));
      }
      assert.deepEqual([...(await single.db.execute(plansOfClaim))], [{ custom: 0, generic: 8 }]);
      for (let call = 0; call < 8; call += 1) await claimAdmissionOn(kept, 1, settings);
      const [read] = await kept.transaction([plansOfClaim]);
      assert.deepEqual([...rowsOf(read)], [{ custom: 0, generic: 16 }]);
    } finally {
      await kept.close();
      await single.close();
    }
  });

  it('counts the urgent reserve as full unless a P0 step is ready', async () => {
    const resource = 'tool:reserve-full';
    const reserved = { ...settings, urgentReserve: 0.25 }; // 1 of 4 slots
    await setResourceLimit(handle.db, resource, 4);
    await makeSteps(resource, 'acme', 2, 5);
    assert.equal(countBy(await claim(10, reserved), (c) => c.resource)[resource], 3);
    assert.equal(await seen(resource, reserved), 'full', 'the last slot is P0’s');
    assert.equal(await seen(resource), 'open', 'without a reserve the slot is anyone’s');
    const [urgent] = await makeSteps(resource, 'acme', 0, 1);
    assert.equal(await seen(resource, reserved), 'open', 'a P0 step may take it');
    assert.deepEqual(
      claimedOn(resource, await claim(10, reserved)).map((c) => c.id),
      [urgent],
    );
  });
});

describe('admission order', () => {
  it('admits P0 before P1 before P2 before P3 when capacity is short', async () => {
    const resource = 'prio:e';
    await setResourceLimit(handle.db, resource, 2);
    // The least urgent are the oldest, so order by due time alone would get this wrong.
    await makeSteps(resource, 'acme', 3, 2, 3_000);
    await makeSteps(resource, 'acme', 2, 2, 2_000);
    await makeSteps(resource, 'acme', 1, 2, 1_000);
    await makeSteps(resource, 'acme', 0, 2);
    const order: Priority[][] = [];
    for (let round = 0; round < 4; round++) {
      const claimed = await claim(100);
      order.push(claimed.map((s) => s.priority));
      await finish(claimed.map((s) => s.id));
    }
    assert.deepEqual(order, [
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
  });

  it('ages a waiting P3 past a fresh P0 after three intervals, not before', async () => {
    const aging: AdmissionSettings = { defaultResourceLimit: 64, agingMs: 10_000 };
    const resource = 'aging:f';
    await setResourceLimit(handle.db, resource, 1);
    // 2.5 intervals past due: effective P1, still behind a fresh P0.
    const [young] = await makeSteps(resource, 'acme', 3, 1, 25_000);
    const [firstP0] = await makeSteps(resource, 'acme', 0, 1);
    const first = await claim(10, aging);
    assert.deepEqual(
      first.map((s) => s.id),
      [firstP0],
    );
    await finish([firstP0 as number]);
    // 3.5 intervals past due: effective P0 and older than the fresh P0, so it goes first.
    await handle.db.execute(
      sql`update task_steps set due_at = now() - interval '35 seconds' where id = ${young}`,
    );
    const [secondP0] = await makeSteps(resource, 'acme', 0, 1);
    const second = await claim(10, aging);
    assert.deepEqual(
      second.map((s) => s.id),
      [young],
    );
    await finish([young as number]);
    // Without aging, the same old P3 would wait behind every P0.
    const [old] = await makeSteps(resource, 'acme', 3, 1, 3_600_000);
    const third = await claim(10, { ...aging, agingMs: 0 });
    assert.deepEqual(
      third.map((s) => s.id),
      [secondP0],
    );
    assert.ok(old);
  });
});

describe('governed admission', () => {
  it('admits nothing of a held priority, even aged, and the rest as usual', async () => {
    const resource = 'gov:hold';
    const p3 = await makeSteps(resource, 'acme', 3, 2, 10 * settings.agingMs);
    const p2 = await makeSteps(resource, 'acme', 2, 2);
    const p0 = await makeSteps(resource, 'acme', 0, 1);
    const claimed = await claim(10, { ...settings, heldPriorities: [2, 3] });
    assert.deepEqual(
      claimed.map((c) => c.id),
      p0,
      'only P0 is admitted; P3 aged to P0 stays held',
    );
    const released = await claim(10, settings);
    assert.deepEqual(
      released.map((c) => c.id).sort((a, b) => a - b),
      [...p3, ...p2].sort((a, b) => a - b),
    );
    await finish([...p0, ...p2, ...p3]);
  });

  it('admits nothing on a closed resource and keeps the governor limit below the configured one', async () => {
    const open = 'tool:gov-open';
    const limited = 'tool:gov-limited';
    const held = await makeSteps(open, 'acme', 1, 3);
    const ids = await makeSteps(limited, 'acme', 1, 5);
    await setResourceLimit(handle.db, limited, 4);
    const first = await claim(10, {
      ...settings,
      closedResources: [open],
      resourceLimits: { [limited]: 2, unrelated: 0 },
    });
    assert.deepEqual(
      countBy(first, (c) => c.resource),
      { [limited]: 2 },
    );
    // A governor limit above the configured one does not raise it.
    const second = await claim(10, {
      ...settings,
      closedResources: [open],
      resourceLimits: { [limited]: 100 },
    });
    assert.deepEqual(
      countBy(second, (c) => c.resource),
      { [limited]: 2 },
    );
    const reopened = await claim(10, settings);
    assert.deepEqual(
      countBy(reopened, (c) => c.resource),
      { [open]: 3 },
    );
    await finish([...held, ...ids]);
  });

  it('keeps the reserve of a resource free of throttled priorities, for the others', async () => {
    const resource = 'gov:throttle';
    await setResourceLimit(handle.db, resource, 8);
    const p3 = await makeSteps(resource, 'acme', 3, 10);
    const throttled = { ...settings, throttledPriorities: [3] as const, throttleReserve: 0.25 };
    const first = await claim(20, throttled);
    assert.deepEqual(
      countBy(first, (c) => `P${c.priority}`),
      { P3: 6 },
      '8 − ⌈8 × 0.25⌉ = 6',
    );
    const p1 = await makeSteps(resource, 'globex', 1, 3);
    const second = await claim(20, throttled);
    assert.deepEqual(
      countBy(second, (c) => `P${c.priority}`),
      { P1: 2 },
      'urgent work takes the reserve at once',
    );
    await finish(first.map((c) => c.id));
    const third = await claim(20, throttled);
    assert.deepEqual(
      countBy(third, (c) => `P${c.priority}`),
      { P1: 1, P3: 3 },
    );
    await setResourceLimit(handle.db, resource, 1);
    await finish([...p3, ...p1]);
    const [alone] = await makeSteps(resource, 'acme', 3, 1);
    const one = await claim(5, throttled);
    assert.deepEqual(
      one.map((c) => c.id),
      [alone],
      'a throttle is not a hold: one slot is always left to a throttled priority',
    );
    await finish([alone as number]);
  });
});

describe('the urgent reserve', () => {
  it('keeps its share of the limit for P0, even from aged lower priorities', async () => {
    const resource = 'gov:urgent';
    await setResourceLimit(handle.db, resource, 10);
    const reserved = { ...settings, urgentReserve: 0.2 };
    // Waiting for three aging intervals makes these P3 steps as urgent as P0 — but not P0.
    const p3 = await makeSteps(resource, 'acme', 3, 12, 100_000);
    const first = await claim(20, reserved);
    assert.deepEqual(
      countBy(first, (c) => `P${c.priority}`),
      { P3: 8 },
      '10 − ⌊10 × 0.2⌋ = 8',
    );
    assert.deepEqual(await claim(20, reserved), [], 'the reserve stays free while P3 waits');
    const p0 = await makeSteps(resource, 'globex', 0, 3);
    const second = await claim(20, reserved);
    assert.deepEqual(
      countBy(second, (c) => `P${c.priority}`),
      { P0: 2 },
      'P0 is admitted at once into the reserve',
    );
    // P0 may use every slot; P3 is admitted only while the reserve stays free after it.
    await finish(first.slice(0, 2).map((c) => c.id));
    const third = await claim(20, reserved);
    assert.deepEqual(
      countBy(third, (c) => `P${c.priority}`),
      { P0: 1 },
      '2 free: P0 first',
    );
    await finish([...second, ...third].map((c) => c.id));
    const fourth = await claim(20, reserved);
    assert.deepEqual(
      countBy(fourth, (c) => `P${c.priority}`),
      { P3: 2 },
      '4 free, 2 reserved',
    );
    // Under the throttle as well, each priority leaves the larger of the two reserves.
    await finish([...p3, ...p0]);
    const more = await makeSteps(resource, 'acme', 3, 12);
    const both = { ...reserved, throttledPriorities: [3] as const, throttleReserve: 0.3 };
    assert.equal((await claim(20, both)).length, 7, '10 − max(⌊10 × 0.2⌋, ⌈10 × 0.3⌉) = 7');
    await finish(more);
  });

  it('admits P0 into the reserve behind aged steps of its own tenant that the reserve keeps out', async () => {
    const resource = 'gov:urgent-same-tenant';
    await setResourceLimit(handle.db, resource, 10);
    const reserved = { ...settings, urgentReserve: 0.2 };
    // Aged to P0's level and older than it, these come first in the order, but not into the reserve.
    const p3 = await makeSteps(resource, 'acme', 3, 12, 100_000);
    assert.equal((await claim(20, reserved)).length, 8, '10 − ⌊10 × 0.2⌋ = 8');
    const p0 = await makeSteps(resource, 'acme', 0, 1);
    assert.deepEqual(
      (await claim(20, reserved)).map((c) => c.id),
      p0,
      'the P0 step takes a slot of the reserve',
    );
    // The same under the guard's cap, and for a priority kept out of a throttle's reserve.
    await finish([...p3, ...p0]);
    const more = await makeSteps(resource, 'acme', 3, 12, 100_000);
    const capped = { ...settings, lowerPriorityCaps: { [resource]: 4 } };
    assert.equal((await claim(20, capped)).length, 4, 'P3 up to the cap');
    const urgent = await makeSteps(resource, 'acme', 0, 1);
    assert.deepEqual(
      (await claim(20, capped)).map((c) => c.id),
      urgent,
      'the P0 step takes a slot above the cap',
    );
    await finish([...more, ...urgent]);
    const throttled = await makeSteps(resource, 'acme', 3, 12, 2 * settings.agingMs + 1_000);
    const throttle = { ...settings, throttledPriorities: [3] as const, throttleReserve: 0.3 };
    assert.equal((await claim(20, throttle)).length, 7, '10 − ⌈10 × 0.3⌉ = 7');
    const p1 = await makeSteps(resource, 'acme', 1, 1);
    assert.deepEqual(
      (await claim(20, throttle)).map((c) => c.id),
      p1,
      'the P1 step takes a slot of the throttle’s reserve',
    );
    await finish([...throttled, ...p1]);
  });

  it('widens to everything above the urgent-wait guard’s cap, for the capped resource only', async () => {
    const resource = 'gov:guarded';
    await setResourceLimit(handle.db, resource, 10);
    const guarded: AdmissionSettings = {
      ...settings,
      urgentReserve: 0.1,
      lowerPriorityCaps: { [resource]: 4, 'gov:elsewhere': 1 },
    };
    const p3 = await makeSteps(resource, 'acme', 3, 8);
    const first = claimedOn(resource, await claim(20, guarded));
    assert.deepEqual(
      countBy(first, (c) => `P${c.priority}`),
      { P3: 4 },
      'P3 up to the cap',
    );
    const lock = await handle.db.transaction((tx) => lockAdmission(tx, guarded));
    assert.ok(lock.full.includes(resource), 'for P1–P3 the resource is full at the cap');
    const p0 = await makeSteps(resource, 'globex', 0, 7);
    const second = claimedOn(resource, await claim(20, guarded));
    assert.deepEqual(
      countBy(second, (c) => `P${c.priority}`),
      { P0: 6 },
      'P0 still takes every slot of the limit',
    );
    await finish([...first, ...second].map((c) => c.id));
    const third = claimedOn(
      resource,
      await claim(20, { ...guarded, lowerPriorityCaps: { 'gov:elsewhere': 1 } }),
    );
    assert.deepEqual(
      countBy(third, (c) => `P${c.priority}`),
      { P0: 1, P3: 4 },
      'another resource’s cap leaves this one to its share: the P0 and all four P3',
    );
    await finish([...p3, ...p0]);
  });

  it('admits no P1–P3 step under a cap of 0 (the guard holding them), while P0 still claims', async () => {
    const resource = 'gov:held';
    await setResourceLimit(handle.db, resource, 10);
    const held: AdmissionSettings = { ...settings, lowerPriorityCaps: { [resource]: 0 } };
    const p2 = await makeSteps(resource, 'acme', 2, 3);
    assert.deepEqual(
      claimedOn(resource, await claim(20, held)),
      [],
      'nothing in flight, and still held',
    );
    const p0 = await makeSteps(resource, 'globex', 0, 2);
    const claimed = claimedOn(resource, await claim(20, held));
    assert.deepEqual(
      countBy(claimed, (c) => `P${c.priority}`),
      { P0: 2 },
      'the P0 steps only',
    );
    await finish(claimed.map((c) => c.id));
    const released = claimedOn(resource, await claim(20, settings));
    assert.deepEqual(
      countBy(released, (c) => `P${c.priority}`),
      { P2: 3 },
      'without the cap they go',
    );
    await finish([...p2, ...p0]);
  });

  it('counts the P1–P3 steps in flight against the guard’s cap, whatever P0 has in flight', async () => {
    const resource = 'gov:lower-only';
    await setResourceLimit(handle.db, resource, 10);
    const capped: AdmissionSettings = { ...settings, lowerPriorityCaps: { [resource]: 2 } };
    const p0 = await makeSteps(resource, 'globex', 0, 3);
    assert.deepEqual(
      countBy(claimedOn(resource, await claim(20, capped)), (c) => `P${c.priority}`),
      { P0: 3 },
    );
    const p3 = await makeSteps(resource, 'acme', 3, 6);
    const lower = claimedOn(resource, await claim(20, capped));
    assert.deepEqual(
      countBy(lower, (c) => `P${c.priority}`),
      { P3: 2 },
      'three P0 steps in flight leave the cap of two to P3',
    );
    const lock = await handle.db.transaction((tx) => lockAdmission(tx, capped));
    assert.ok(lock.full.includes(resource), 'for P1–P3 the resource is full at the cap');
    // The P0 steps finishing opens no slot to lower priorities.
    await finish(p0);
    assert.deepEqual(claimedOn(resource, await claim(20, capped)), [], 'still two P3 in flight');
    await finish(lower.map((c) => c.id));
    assert.equal(claimedOn(resource, await claim(20, capped)).length, 2, 'two more as two finish');
    await finish(p3);
  });

  it('keeps nothing of a limit too small for the share', async () => {
    const resource = 'gov:urgent-small';
    await setResourceLimit(handle.db, resource, 4);
    const ids = await makeSteps(resource, 'acme', 3, 5);
    const claimed = await claim(20, { ...settings, urgentReserve: 0.2 });
    assert.equal(claimed.length, 4, '⌊4 × 0.2⌋ = 0: every slot is open to every priority');
    await finish(ids);
  });
});

describe('aging and fairness', () => {
  it('lifts a priority class as a whole: an older flood does not outrank another tenant', async () => {
    const resource = 'aging:fair';
    await setResourceLimit(handle.db, resource, 4);
    const flood = await makeSteps(resource, 'acme', 2, 8, 5 * settings.agingMs);
    const fresh = await makeSteps(resource, 'globex', 2, 4);
    const claimed = await claim(10);
    assert.deepEqual(
      countBy(claimed, (c) => c.tenantId),
      { acme: 2, globex: 2 },
    );
    await finish([...flood, ...fresh]);
  });

  it('does not lift a class by the backlog of a tenant its cap keeps out', async () => {
    const resource = 'aging:capped';
    await setResourceLimit(handle.db, resource, 3);
    await setTenantLimit(handle.db, { tenantId: 'acme', resource, floor: 0, cap: 1 });
    const running = await makeSteps(resource, 'acme', 3, 1);
    assert.equal((await claim(10)).length, 1);
    // Old because acme is at its cap, not because P3 waits for more urgent work.
    const capped = await makeSteps(resource, 'acme', 3, 4, 5 * settings.agingMs);
    const p3 = await makeSteps(resource, 'globex', 3, 3);
    const p1 = await makeSteps(resource, 'globex', 1, 2, 1_000);
    assert.deepEqual(
      (await claim(10)).map((c) => c.id),
      p1,
      'P1 before fresh P3 of another tenant',
    );
    await clearTenantLimit(handle.db, 'acme', resource);
    await finish([...running, ...capped, ...p3, ...p1]);
  });
});

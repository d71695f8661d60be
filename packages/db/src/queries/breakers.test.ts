/**
 * Breaker storage against a real Postgres: the leader-epoch fence (a stale or unknown epoch writes
 * nothing, a successor's advance waits for an in-flight write), transitions recorded with the
 * state, the cool-down query, and a round trip of the core state. Time is set through the state's
 * own timestamps, never by sleeping.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { CLOSED_BREAKER, SluiceErrorCode, isSluiceError, type BreakerState } from '@sluice/core';
import { openDatabase, type DatabaseHandle } from '../client.js';
import { migrateDatabase } from '../migrate.js';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '../testing/index.js';
import { advanceLeaderEpoch } from './leader-epochs.js';
import {
  GOVERNOR_LEADER_ROLE,
  dueBreakerCoolDowns,
  loadBreakers,
  recentBreakerTransitions,
  saveBreaker,
} from './breakers.js';

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
});

after(async () => {
  await handle.close();
  await database.drop();
});

beforeEach(async () => {
  await handle.db.execute(sql`truncate breakers, breaker_transitions, leader_epochs`);
});

const T0 = Date.parse('2026-01-01T00:00:00Z');

function opened(coolDownUntilMs: number, reason = 'failure rate 0.6'): BreakerState {
  return { ...CLOSED_BREAKER, status: 'open', coolDownUntilMs, reason };
}

async function transitionCount(): Promise<number> {
  const rows = await handle.db.execute<{ n: number }>(
    sql`select count(*)::int as n from breaker_transitions`,
  );
  return rows[0]?.n ?? -1;
}

describe('saveBreaker', () => {
  it('stores the state and its transition, and loads them back', async () => {
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const state = opened(T0 + 30_000);
    const saved = await saveBreaker(
      handle.db,
      {
        resource: 'tool:search',
        state,
        transition: { from: 'closed', to: 'open', reason: 'failure rate 0.6' },
      },
      epoch,
    );
    assert.equal(saved, true);
    const [stored] = await loadBreakers(handle.db);
    assert.ok(stored);
    assert.equal(stored.resource, 'tool:search');
    assert.equal(stored.status, 'open');
    assert.deepEqual(stored.state, state);
    assert.equal(stored.coolDownUntil?.getTime(), T0 + 30_000);
    assert.equal(stored.epoch, epoch);
    assert.ok(stored.changedAt instanceof Date);

    const transitions = await recentBreakerTransitions(handle.db, { limit: 10 });
    assert.equal(transitions.length, 1);
    assert.deepEqual(
      transitions.map(({ resource, from, to, reason, epoch: e }) => ({
        resource,
        from,
        to,
        reason,
        epoch: e,
      })),
      [{ resource: 'tool:search', from: 'closed', to: 'open', reason: 'failure rate 0.6', epoch }],
    );
  });

  it('writes nothing with a stale epoch, an unknown one, or before any governor took one', async () => {
    const write = {
      resource: 'tool:search',
      state: opened(T0),
      transition: { from: 'closed', to: 'open', reason: 'x' },
    } as const;
    assert.equal(await saveBreaker(handle.db, write, 1), false, 'no leader_epochs row yet');
    const old = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const current = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-b');
    assert.equal(await saveBreaker(handle.db, write, old), false, 'deposed leader');
    assert.equal(await saveBreaker(handle.db, write, current + 1), false, 'future epoch');
    await advanceLeaderEpoch(handle.db, 'scheduler', 'sched-a');
    assert.deepEqual(await loadBreakers(handle.db), []);
    assert.equal(await transitionCount(), 0);

    // The current leader writes; the deposed one then cannot overwrite it.
    assert.equal(
      await saveBreaker(handle.db, { resource: 'tool:search', state: CLOSED_BREAKER }, current),
      true,
    );
    assert.equal(await saveBreaker(handle.db, write, old), false);
    const [stored] = await loadBreakers(handle.db);
    assert.equal(stored?.status, 'closed');
    assert.equal(stored?.epoch, current);
    assert.equal(await transitionCount(), 0);
  });

  it("makes a successor's epoch advance wait for an in-flight write, which it then sees", async () => {
    const old = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    let advanced: Promise<number> | undefined;
    await handle.db.transaction(async (tx) => {
      assert.equal(await saveBreaker(tx, { resource: 'mcp:files', state: opened(T0) }, old), true);
      // The successor's advance blocks on the fence row until this transaction commits.
      advanced = advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-b');
      const stop = { done: false };
      const blocked = await Promise.race([
        advanced.then(() => 'advanced'),
        waitForLockWait(stop).then(() => 'waiting'),
      ]);
      stop.done = true;
      assert.equal(blocked, 'waiting');
    });
    const current = await advanced;
    assert.equal(current, old + 1);
    const [stored] = await loadBreakers(handle.db);
    assert.equal(stored?.resource, 'mcp:files', 'committed before the successor took over');
    assert.equal(
      await saveBreaker(handle.db, { resource: 'mcp:files', state: opened(T0) }, old),
      false,
    );
  });

  it('keeps changed_at across saves of the same status and moves it on a status change', async () => {
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    await saveBreaker(handle.db, { resource: 'tool:x', state: CLOSED_BREAKER }, epoch);
    await handle.db.execute(
      sql`update breakers set changed_at = now() - interval '1 hour' where resource = 'tool:x'`,
    );
    const busier: BreakerState = {
      ...CLOSED_BREAKER,
      buckets: [{ startMs: T0, calls: 3, failures: 1 }],
    };
    await saveBreaker(handle.db, { resource: 'tool:x', state: busier }, epoch);
    const [same] = await loadBreakers(handle.db);
    assert.ok(same && Date.now() - same.changedAt.getTime() > 50 * 60_000, 'unchanged');
    assert.deepEqual(same.state, busier);
    await saveBreaker(handle.db, { resource: 'tool:x', state: opened(T0) }, epoch);
    const [moved] = await loadBreakers(handle.db);
    assert.ok(moved && Date.now() - moved.changedAt.getTime() < 10 * 60_000, 'moved to now');
  });

  it('refuses a transition that does not end in the state it stores', async () => {
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    await assert.rejects(
      saveBreaker(
        handle.db,
        {
          resource: 'tool:x',
          state: CLOSED_BREAKER,
          transition: { from: 'closed', to: 'open', reason: 'x' },
        },
        epoch,
      ),
      (error) => isSluiceError(error, SluiceErrorCode.InvalidArgument),
    );
    assert.deepEqual(await loadBreakers(handle.db), []);
  });
});

describe('dueBreakerCoolDowns', () => {
  it('lists open breakers whose cool-down is over, and only those', async () => {
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const halfOpen: BreakerState = {
      ...CLOSED_BREAKER,
      status: 'half_open',
      coolDownUntilMs: T0 - 60_000,
      halfOpenSinceMs: T0,
    };
    await saveBreaker(handle.db, { resource: 'tool:late', state: opened(T0 - 1_000) }, epoch);
    await saveBreaker(handle.db, { resource: 'tool:early', state: opened(T0 - 5_000) }, epoch);
    await saveBreaker(handle.db, { resource: 'tool:exact', state: opened(T0) }, epoch);
    await saveBreaker(handle.db, { resource: 'tool:future', state: opened(T0 + 1) }, epoch);
    await saveBreaker(handle.db, { resource: 'tool:probing', state: halfOpen }, epoch);
    await saveBreaker(handle.db, { resource: 'tool:fine', state: CLOSED_BREAKER }, epoch);
    assert.deepEqual(await dueBreakerCoolDowns(handle.db, new Date(T0)), [
      'tool:early',
      'tool:late',
      'tool:exact',
    ]);
    assert.deepEqual(await dueBreakerCoolDowns(handle.db, new Date(T0 - 10_000)), []);
  });
});

describe('recentBreakerTransitions', () => {
  it('lists newest first, by resource or all, up to the limit', async () => {
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const steps = [
      { resource: 'tool:a', state: opened(T0), from: 'closed', to: 'open' },
      { resource: 'tool:b', state: opened(T0), from: 'closed', to: 'open' },
      {
        resource: 'tool:a',
        state: { ...CLOSED_BREAKER, status: 'half_open', halfOpenSinceMs: T0 } as BreakerState,
        from: 'open',
        to: 'half_open',
      },
      { resource: 'tool:a', state: CLOSED_BREAKER, from: 'half_open', to: 'closed' },
    ] as const;
    for (const [i, step] of steps.entries()) {
      await saveBreaker(
        handle.db,
        {
          resource: step.resource,
          state: step.state,
          transition: { from: step.from, to: step.to, reason: `r${i}` },
        },
        epoch,
      );
    }
    const ofA = await recentBreakerTransitions(handle.db, { resource: 'tool:a', limit: 10 });
    assert.deepEqual(
      ofA.map((t) => `${t.from}>${t.to}:${t.reason}`),
      ['half_open>closed:r3', 'open>half_open:r2', 'closed>open:r0'],
    );
    const all = await recentBreakerTransitions(handle.db, { limit: 2 });
    assert.deepEqual(
      all.map((t) => t.reason),
      ['r3', 'r2'],
    );
    assert.ok(all.every((t) => typeof t.id === 'string' && t.at instanceof Date));
  });
});

/**
 * Resolves once some backend of the test database waits for a lock (the blocked advance), or when
 * `stop.done` is set (the race was already decided the other way).
 */
async function waitForLockWait(stop: { done: boolean }): Promise<void> {
  const probe = openDatabase(database.url, { max: 1 });
  try {
    while (!stop.done) {
      const rows = await probe.db.execute<{ n: number }>(sql`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'
      `);
      if ((rows[0]?.n ?? 0) > 0) return;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  } finally {
    await probe.close();
  }
}

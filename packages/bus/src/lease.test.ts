import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { createBusCatalog } from './catalog.js';
import type { BusCatalog } from './catalog.js';
import { createLease } from './lease.js';
import type { Lease, LeaseLostReason } from './lease.js';
import { openKvBuckets } from './topology.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

const TTL_MS = 1_500;

/** One lease holder with its own connection (a "process"), recording what happened to it. */
interface Holder {
  readonly id: string;
  readonly nc: NatsConnection;
  readonly lease: Lease;
  readonly events: { at: number; what: 'acquired' | LeaseLostReason; revision?: number }[];
}

/** Waits until `condition` holds, failing after `timeoutMs`. */
async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) assert.fail(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - started;
}

describe('createLease', () => {
  const catalogs: BusCatalog[] = [];
  const holders: Holder[] = [];
  let admin: NatsConnection;

  before(async () => {
    admin = await connect({ servers: natsUrl() });
  });

  after(async () => {
    for (const h of holders) {
      await h.lease.stop();
      if (!h.nc.isClosed()) await h.nc.close();
    }
    const jsm = await jetstreamManager(admin);
    for (const c of catalogs) {
      await jsm.streams.delete(`KV_${c.buckets.leases}`).catch(() => false);
      await jsm.streams.delete(`KV_${c.buckets.governor}`).catch(() => false);
    }
    await admin.close();
  });

  /** A fresh bucket for one test, and the admin's view of it. */
  async function bucket(): Promise<{ catalog: BusCatalog; kv: KV }> {
    const catalog = createBusCatalog(uniquePrefix('lease'));
    catalogs.push(catalog);
    const { leases } = await openKvBuckets(admin, catalog, { leaseTtlMs: TTL_MS });
    return { catalog, kv: leases };
  }

  async function holder(catalog: BusCatalog, id = `h-${randomUUID()}`): Promise<Holder> {
    const nc = await connect({ servers: natsUrl() });
    const { leases } = await openKvBuckets(nc, catalog, { leaseTtlMs: TTL_MS });
    const events: Holder['events'] = [];
    const lease = createLease({
      kv: leases,
      key: 'leader',
      holderId: id,
      ttlMs: TTL_MS,
      onAcquired: (revision) => events.push({ at: performance.now(), what: 'acquired', revision }),
      onLost: (reason) => {
        events.push({ at: performance.now(), what: reason });
      },
    });
    const h = { id, nc, lease, events };
    holders.push(h);
    return h;
  }

  const leaders = (hs: Holder[]): Holder[] => hs.filter((h) => h.lease.isLeader());

  it('elects exactly one of two holders and keeps it past several TTLs', async () => {
    const { catalog, kv } = await bucket();
    const a = await holder(catalog);
    const b = await holder(catalog);
    await Promise.all([a.lease.start(), b.lease.start()]);
    const leader = leaders([a, b]);
    assert.equal(leader.length, 1, 'exactly one leader right after start');
    const [winner] = leader;
    assert.ok(winner);
    assert.equal(winner.lease.revision(), winner.events[0]?.revision);

    // Renewals keep the key alive for well over its TTL; never two leaders at once.
    const watchUntil = Date.now() + 3 * TTL_MS;
    while (Date.now() < watchUntil) {
      assert.deepEqual(leaders([a, b]), [winner]);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const entry = await kv.get('leader');
    assert.equal(entry?.json<{ holder: string }>().holder, winner.id);
    const loser = winner === a ? b : a;
    assert.deepEqual(loser.events, []);
    assert.equal(loser.lease.revision(), undefined);
  });

  it('hands over at once when the leader stops', async () => {
    const { catalog, kv } = await bucket();
    const a = await holder(catalog);
    await a.lease.start();
    assert.ok(a.lease.isLeader());
    const b = await holder(catalog);
    await b.lease.start();
    assert.equal(b.lease.isLeader(), false);

    const stopped = performance.now();
    await a.lease.stop();
    assert.deepEqual(
      a.events.map((e) => e.what),
      ['acquired', 'stopped'],
    );
    const waited = await until(() => b.lease.isLeader(), TTL_MS, 'the follower to take over');
    // A deleted key is seen through the watch; no waiting for the TTL.
    assert.ok(waited < TTL_MS, `took ${waited} ms`);
    const acquired = b.events.find((e) => e.what === 'acquired');
    assert.ok(acquired && acquired.at >= stopped);
    assert.ok(
      (acquired.revision ?? 0) > (a.events[0]?.revision ?? Infinity),
      'fencing token grows',
    );
    assert.equal((await kv.get('leader'))?.json<{ holder: string }>().holder, b.id);
  });

  it('lets another holder take over after the TTL when the leader dies, never overlapping', async () => {
    const { catalog } = await bucket();
    const a = await holder(catalog);
    await a.lease.start();
    assert.ok(a.lease.isLeader());
    const b = await holder(catalog);
    await b.lease.start();

    // "Kill" the leader: its connection goes away without a chance to delete the key.
    const died = performance.now();
    await a.nc.close();
    const waited = await until(() => b.lease.isLeader(), 4 * TTL_MS, 'the follower to take over');
    assert.ok(waited >= TTL_MS / 2, `took over after ${waited} ms, before the key could expire`);

    await until(
      () => a.events.some((e) => e.what === 'expired'),
      TTL_MS,
      'the dead leader to step down',
    );
    const stepDown = a.events.find((e) => e.what === 'expired');
    const takeOver = b.events.find((e) => e.what === 'acquired');
    assert.ok(stepDown && takeOver);
    assert.ok(stepDown.at < takeOver.at, 'the old leader stepped down before the new one started');
    assert.ok(stepDown.at - died <= TTL_MS, 'stepped down within the TTL');
    assert.equal(a.lease.isLeader(), false);
  });

  it('steps down as superseded when someone else overwrites the key', async () => {
    const { catalog, kv } = await bucket();
    const a = await holder(catalog);
    await a.lease.start();
    assert.ok(a.lease.isLeader());
    await kv.put(
      'leader',
      JSON.stringify({ holder: 'intruder', acquired_at: new Date().toISOString() }),
    );
    await until(() => !a.lease.isLeader(), TTL_MS, 'the leader to notice');
    assert.deepEqual(
      a.events.map((e) => e.what),
      ['acquired', 'superseded'],
    );
    // It does not delete the intruder's key on stop.
    await a.lease.stop();
    assert.equal((await kv.get('leader'))?.json<{ holder: string }>().holder, 'intruder');
  });

  it('takes up its own entry when the answer to an earlier write was lost', async () => {
    const { catalog, kv } = await bucket();
    const id = `h-${randomUUID()}`;
    await kv.create(
      'leader',
      JSON.stringify({ holder: id, acquired_at: new Date().toISOString() }),
    );
    const a = await holder(catalog, id);
    await a.lease.start();
    assert.ok(a.lease.isLeader(), 'the entry with its own holder id is its lease');
  });

  it('refuses a bucket whose TTL is not the lease TTL', async () => {
    const { catalog } = await bucket();
    const nc = await connect({ servers: natsUrl() });
    try {
      const { leases } = await openKvBuckets(nc, catalog, { leaseTtlMs: TTL_MS });
      const lease = createLease({
        kv: leases,
        key: 'leader',
        holderId: 'x',
        ttlMs: 3_000,
        onAcquired: () => undefined,
        onLost: () => undefined,
      });
      await assert.rejects(lease.start(), (err: unknown) =>
        isSluiceError(err, SluiceErrorCode.FailedPrecondition),
      );
      assert.equal(lease.isLeader(), false);
    } finally {
      await nc.close();
    }
  });
});

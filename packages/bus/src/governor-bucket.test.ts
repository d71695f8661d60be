import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { isMissingGovernorBucket, openGovernorBucket } from './governor-bucket.js';
import { deletePrefixResources, natsUrl, startNatsServer, uniquePrefix } from './testing/index.js';
import { openKvBuckets } from './topology.js';

const LEASE_TTL_MS = 5_000;

describe('openGovernorBucket', () => {
  const prefix = uniquePrefix('govbucket');
  after(() => deletePrefixResources(natsUrl(), prefix));

  it('reads as missing until the governor creates its bucket, then reads its entries', async () => {
    const nc = await connect({ servers: natsUrl() });
    try {
      const catalog = createBusCatalog(prefix);
      const reader = openGovernorBucket(nc, catalog);
      await assert.rejects(reader.get('decision'), isMissingGovernorBucket);

      const { governor } = await openKvBuckets(nc, catalog, { leaseTtlMs: LEASE_TTL_MS });
      assert.equal(await reader.get('decision'), null, 'created, nothing in it yet');
      await governor.put('decision', 'held: P3');
      assert.equal((await reader.get('decision'))?.string(), 'held: P3');
    } finally {
      await nc.close();
    }
  });

  it('reads while the bucket is being created without crashing nats-server 2.9', async () => {
    // nats-server 2.9.10 panics on a STREAM.MSG.GET that reaches a stream between its listing and
    // its store (see governor-bucket.ts). Readers bound the naive way (`Kvm.open`) crashed this
    // private server within 0–7 rounds in five tries out of five; each round races three readers
    // against the creation of a fresh bucket.
    const rounds = 40;
    const crashes: string[] = [];
    await using server = await startNatsServer({ onUnexpectedExit: (r) => crashes.push(r) });
    const creator = await connect({ servers: server.url });
    const readers = await Promise.all([1, 2, 3].map(() => connect({ servers: server.url })));
    try {
      const jsm = await jetstreamManager(creator);
      const unexpected: unknown[] = [];
      for (let round = 0; round < rounds && crashes.length === 0; round++) {
        const catalog = createBusCatalog(`race${String(round)}`);
        let creating = true;
        const reading = readers.map(async (nc) => {
          const reader = openGovernorBucket(nc, catalog);
          while (creating) {
            try {
              await reader.get('decision');
            } catch (error) {
              // A read that meets the creation window itself waits out its request timeout
              // (direct gets are not answered until the store is ready): slow, never a crash.
              const timedOut = error instanceof Error && error.name === 'TimeoutError';
              if (!isMissingGovernorBucket(error) && !timedOut) unexpected.push(error);
            }
          }
        });
        try {
          await openKvBuckets(creator, catalog, { leaseTtlMs: LEASE_TTL_MS });
        } catch (error) {
          if (crashes.length === 0) throw error; // Else the server's death says more, below.
          break;
        } finally {
          creating = false;
          await Promise.all(reading);
        }
        await jsm.streams.delete(`KV_${catalog.buckets.governor}`);
        await jsm.streams.delete(`KV_${catalog.buckets.leases}`);
      }
      assert.deepEqual(crashes, [], 'the server survived every round');
      assert.deepEqual(unexpected, [], 'reads failed only as "missing" (or slow)');
    } finally {
      await Promise.all([creator, ...readers].map((nc) => nc.close()));
    }
  });
});

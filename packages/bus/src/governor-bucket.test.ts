import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { isMissingGovernorBucket, openGovernorBucket } from './governor-bucket.js';
import { raceReadsWithCreation } from './testing/creation-race.js';
import { deletePrefixResources, natsUrl, uniquePrefix } from './testing/index.js';
import { kvStreamName, openKvBuckets } from './topology.js';

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
    // Readers bound the naive way (`Kvm.open`, reading by STREAM.MSG.GET) crashed the private
    // server within 0–7 rounds in five tries out of five.
    const { crashes, unexpected } = await raceReadsWithCreation({
      rounds: 40,
      async create(nc, catalog) {
        await openKvBuckets(nc, catalog, { leaseTtlMs: LEASE_TTL_MS });
        return [kvStreamName(catalog.buckets.governor), kvStreamName(catalog.buckets.leases)];
      },
      read: (nc, catalog) => openGovernorBucket(nc, catalog).get('decision'),
      isExpectedFailure: isMissingGovernorBucket,
    });
    assert.deepEqual(crashes, [], 'the server survived every round');
    assert.deepEqual(unexpected, [], 'reads failed only as "missing" (or slow)');
  });
});

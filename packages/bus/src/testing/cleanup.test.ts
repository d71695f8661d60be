/**
 * The cleanup of a test's prefix on the shared server: its streams whatever the case of their
 * prefix (a test may name its own stream `<prefix>_…`; the catalog's are `<PREFIX>_…`) and its KV
 * buckets' streams, but not a stream whose name only begins like the prefix.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { deletePrefixResources, natsUrl, uniquePrefix } from './index.js';

describe('deletePrefixResources', () => {
  const prefix = uniquePrefix('cleanup');
  const neighbour = `${prefix}x`;
  after(() => deletePrefixResources(natsUrl(), neighbour));

  it("deletes the prefix's streams in either case and its buckets, and nothing else", async () => {
    const nc = await connect({ servers: natsUrl() });
    try {
      const jsm = await jetstreamManager(nc);
      const owned = [`${prefix}_pulls`, `${prefix.toUpperCase()}_STEPS`, `KV_${prefix}_leases`];
      const kept = `${neighbour}_pulls`;
      for (const name of [...owned, kept]) {
        await jsm.streams.add({ name, subjects: [`${name}.>`], max_bytes: 64 * 1024 });
      }
      assert.equal(await deletePrefixResources(natsUrl(), prefix), owned.length);
      const left: string[] = [];
      for await (const stream of jsm.streams.list()) left.push(stream.config.name);
      assert.deepEqual(
        [...owned, kept].filter((name) => left.includes(name)),
        [kept],
      );
    } finally {
      await nc.close();
    }
  });
});

import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { stepsStreamSpec } from './specs.js';
import { readStreamMessage } from './stream-message.js';
import { raceReadsWithCreation } from './testing/creation-race.js';
import { deletePrefixResources, natsUrl, uniquePrefix } from './testing/index.js';
import { ensureStream, isStreamNotFound } from './topology.js';

describe('readStreamMessage', () => {
  const prefix = uniquePrefix('streammsg');
  after(() => deletePrefixResources(natsUrl(), prefix));

  it('reads a message by sequence, null once it is gone, and fails for a missing stream', async () => {
    const nc = await connect({ servers: natsUrl() });
    try {
      const catalog = createBusCatalog(prefix);
      const jsm = await jetstreamManager(nc);
      const stream = catalog.streams.steps;
      await assert.rejects(readStreamMessage(jsm, stream, 1), isStreamNotFound);

      await ensureStream(jsm, stepsStreamSpec(catalog));
      const withId = headers();
      withId.set('Nats-Msg-Id', 'dispatch-1');
      const js = jetstream(nc);
      const subject = catalog.subjects.step('tool', 1);
      const first = await js.publish(subject, 'one', { headers: withId });
      await js.publish(subject, 'two');

      const message = await readStreamMessage(jsm, stream, first.seq);
      assert.equal(message?.string(), 'one');
      assert.equal(message?.header.get('Nats-Msg-Id'), 'dispatch-1');
      await jsm.streams.deleteMessage(stream, first.seq);
      assert.equal(await readStreamMessage(jsm, stream, first.seq), null, 'deleted');
      assert.equal(await readStreamMessage(jsm, stream, 99), null, 'never there');
    } finally {
      await nc.close();
    }
  });

  it('reads while the stream is being created without crashing nats-server 2.9', async () => {
    // The reads as they were (STREAM.MSG.GET, no info first) crashed the private server in three
    // tries out of three.
    const { crashes, unexpected } = await raceReadsWithCreation({
      rounds: 40,
      async create(nc, catalog) {
        await ensureStream(await jetstreamManager(nc), stepsStreamSpec(catalog));
        return [catalog.streams.steps];
      },
      read: async (nc, catalog) =>
        readStreamMessage(
          await jetstreamManager(nc, { checkAPI: false }),
          catalog.streams.steps,
          1,
        ),
      isExpectedFailure: isStreamNotFound,
    });
    assert.deepEqual(crashes, [], 'the server survived every round');
    assert.deepEqual(unexpected, [], 'reads failed only as "stream not found" (or slow)');
  });
});

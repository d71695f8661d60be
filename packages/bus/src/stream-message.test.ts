import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { stepsStreamSpec } from './specs.js';
import { readStreamMessage } from './stream-message.js';
import { deletePrefixResources, natsUrl, startNatsServer, uniquePrefix } from './testing/index.js';
import { ensureStream } from './topology.js';

const STREAM_NOT_FOUND = 10059;

const isStreamNotFound = (error: unknown) =>
  error instanceof JetStreamApiError && error.code === STREAM_NOT_FOUND;

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
    // As governor-bucket.test.ts: a STREAM.MSG.GET between a stream's listing and its store
    // crashes 2.9.10. Each round races three readers against the creation of a steps stream.
    const rounds = 40;
    const crashes: string[] = [];
    await using server = await startNatsServer({ onUnexpectedExit: (r) => crashes.push(r) });
    const creator = await connect({ servers: server.url });
    const readers = await Promise.all([1, 2, 3].map(() => connect({ servers: server.url })));
    try {
      const creatorJsm = await jetstreamManager(creator);
      const readerJsms = await Promise.all(readers.map((nc) => jetstreamManager(nc)));
      const unexpected: unknown[] = [];
      for (let round = 0; round < rounds && crashes.length === 0; round++) {
        const catalog = createBusCatalog(`race${String(round)}`);
        let creating = true;
        const reading = readerJsms.map(async (jsm) => {
          while (creating) {
            try {
              await readStreamMessage(jsm, catalog.streams.steps, 1);
            } catch (error) {
              // A read in the creation window itself waits out its timeout: slow, not a crash.
              const timedOut = error instanceof Error && error.name === 'TimeoutError';
              if (!isStreamNotFound(error) && !timedOut) unexpected.push(error);
            }
          }
        });
        try {
          await ensureStream(creatorJsm, stepsStreamSpec(catalog));
        } catch (error) {
          if (crashes.length === 0) throw error; // Else the server's death says more, below.
          break;
        } finally {
          creating = false;
          await Promise.all(reading);
        }
        await creatorJsm.streams.delete(catalog.streams.steps);
      }
      assert.deepEqual(crashes, [], 'the server survived every round');
      assert.deepEqual(unexpected, [], 'reads failed only as "stream not found" (or slow)');
    } finally {
      await Promise.all([creator, ...readers].map((nc) => nc.close()));
    }
  });
});

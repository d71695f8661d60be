/**
 * Bounded pulls against real servers: the machine's shared one for the normal path, and a private
 * nats-server frozen with SIGSTOP for the missed-heartbeat path (the client then hears nothing —
 * no messages, no heartbeats, no expiry — which is what makes v3's fetch/next throw).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type Consumer,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { fetchEach, isHeartbeatsMissed, nextOrNull } from './fetch.js';
import { deletePrefixResources, natsUrl, startNatsServer, uniquePrefix } from './testing/index.js';

/** A stream `<name>` on `<name>.>` with one durable pull consumer `work`. */
async function streamWithConsumer(nc: NatsConnection, name: string): Promise<Consumer> {
  const jsm: JetStreamManager = await jetstreamManager(nc);
  await jsm.streams.add({ name, subjects: [`${name}.>`], max_bytes: 1024 * 1024 });
  await jsm.consumers.add(name, { durable_name: 'work', ack_policy: AckPolicy.Explicit });
  return jetstream(nc).consumers.get(name, 'work');
}

describe('bounded pulls', () => {
  const prefix = uniquePrefix('fetch');
  const stream = `${prefix}_pulls`;
  let nc: NatsConnection;
  let consumer: Consumer;

  before(async () => {
    nc = await connect({ servers: natsUrl() });
    consumer = await streamWithConsumer(nc, stream);
  });
  after(async () => {
    await nc.close();
    await deletePrefixResources(natsUrl(), prefix);
  });

  it('hands each message of a batch to the handler in order and counts them', async () => {
    const js = jetstream(nc);
    for (const text of ['a', 'b', 'c']) await js.publish(`${stream}.x`, text);
    const seen: string[] = [];
    const count = await fetchEach(consumer, { maxMessages: 2, expiresMs: 1_000 }, async (m) => {
      seen.push(m.string());
      await m.ackAck();
    });
    assert.equal(count, 2);
    assert.deepEqual(seen, ['a', 'b']);
    const last = await nextOrNull(consumer, 1_000);
    assert.equal(last?.string(), 'c');
    await last?.ackAck();
  });

  it('returns an empty batch and null when nothing is there', async () => {
    assert.equal(await fetchEach(consumer, { maxMessages: 5, expiresMs: 1_000 }, () => {}), 0);
    assert.equal(await nextOrNull(consumer, 1_000), null);
  });

  it('passes a handler’s error through', async () => {
    await jetstream(nc).publish(`${stream}.x`, 'boom');
    await assert.rejects(
      fetchEach(consumer, { maxMessages: 1, expiresMs: 1_000 }, (m) => {
        m.nak();
        throw new Error('handler failed');
      }),
      /handler failed/,
    );
  });
});

describe('bounded pulls when the server goes silent', () => {
  it('ends the batch on missed heartbeats, where the bare client throws', async () => {
    await using server = await startNatsServer();
    const nc = await connect({ servers: server.url, reconnect: false });
    try {
      const consumer = await streamWithConsumer(nc, 'silent');
      server.freeze();
      try {
        // Shown first: the client's own fetch throws once two heartbeats are missed.
        const bare = await consumer.fetch({ max_messages: 1, expires: 1_000 });
        await assert.rejects(
          (async () => {
            for await (const message of bare) void message;
          })(),
          (error: unknown) => isHeartbeatsMissed(error),
        );
        assert.equal(await fetchEach(consumer, { maxMessages: 1, expiresMs: 1_000 }, () => {}), 0);
        assert.equal(await nextOrNull(consumer, 1_000), null);
      } finally {
        server.thaw();
      }
    } finally {
      await nc.close();
    }
  });
});

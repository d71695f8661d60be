/**
 * The nats.js core client as patched for Sluice (patches/@nats-io__nats-core@3.4.0.patch): an
 * answered request is settled once. Unpatched, every answered request (each JetStream publish and
 * ack among them) also rejected its already resolved promise with a new `RequestError`, building a
 * stack trace for nothing: ~3 % of a busy scheduler's CPU (issue 7 profile). Checked against the
 * real server, so an upgrade that drops the patch is caught.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats } from './connect.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

describe('requests of the nats.js client (Sluice patch: settled once)', () => {
  let nc: NatsConnection;
  before(async () => {
    nc = await connectNats({ url: natsUrl(), name: 'bus-nats-core-patch-test' });
  });
  after(async () => {
    await closeNats(nc);
  });

  it('answers each request without settling its promise a second time', async () => {
    const subject = `${uniquePrefix('t_patch')}.echo`;
    const responder = nc.subscribe(subject, {
      callback: (_error, msg) => {
        msg.respond(msg.data);
      },
    });
    await nc.flush();
    // A promise settled twice is only visible to this (deprecated, still emitted) process event.
    const settledAgain: unknown[] = [];
    const onMultipleResolves = (type: string, _promise: unknown, value: unknown): void => {
      settledAgain.push({ type, value });
    };
    process.on('multipleResolves', onMultipleResolves);
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          nc.request(subject, new TextEncoder().encode(String(i)), { timeout: 5_000 }),
        ),
      );
      assert.deepEqual(
        answers.map((answer) => answer.string()),
        Array.from({ length: 20 }, (_, i) => String(i)),
      );
      // The second settlements were synchronous with each answer; let any stray one surface.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(settledAgain, []);
    } finally {
      process.off('multipleResolves', onMultipleResolves);
      responder.unsubscribe();
    }
  });

  it('still rejects a request nobody answers', async () => {
    const subject = `${uniquePrefix('t_patch')}.nobody`;
    await assert.rejects(nc.request(subject, new Uint8Array(), { timeout: 2_000 }));
  });
});

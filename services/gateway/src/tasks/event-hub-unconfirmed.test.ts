/**
 * The event hub when NATS does not answer (a frozen or cut-off server whose connection still looks
 * open): a new watch must not wait for NATS before it replays the task's events from Postgres.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog } from '@sluice/bus';
import { startNatsServer, uniquePrefix, type NatsServer } from '@sluice/bus/testing';
import { createCapturingLogger } from '@sluice/telemetry/testing';
import { startEventHub } from './event-hub.js';

const TASK = '00000000-0000-4000-8000-000000000021';

let server: NatsServer;
let nc: NatsConnection;
const { log } = createCapturingLogger('event-hub-unconfirmed-test', 'warn');

before(async () => {
  server = await startNatsServer();
  nc = await connectNats({ url: server.url, name: 'event-hub-unconfirmed-test' });
});

after(async () => {
  server.thaw();
  await closeNats(nc);
  await server[Symbol.asyncDispose]();
});

describe('event hub, NATS not answering', () => {
  it('lets a watch begin without the subscription confirmed', async () => {
    const hub = startEventHub(nc, createBusCatalog(uniquePrefix('event-hub-frozen')), log, 0);
    server.freeze();
    try {
      const outcome = await Promise.race([
        hub
          .listen(TASK, () => undefined)
          .then((stop) => {
            stop();
            return 'listening';
          }),
        // nats.js takes the connection for dead only after its pings go unanswered (minutes).
        new Promise((resolve) => setTimeout(() => resolve('still waiting after 10 s'), 10_000)),
      ]);
      assert.equal(outcome, 'listening');
    } finally {
      server.thaw();
      hub.close();
    }
  });
});

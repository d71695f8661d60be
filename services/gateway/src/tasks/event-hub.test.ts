/**
 * The gateway's one subscription to task event notices, on the machine's NATS: it carries the
 * notices of watched tasks, and costs nothing for tasks nobody watches — no subscription at all
 * while nobody watches, no decoding of another task's notice while someone does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  encodeMessage,
  type BusCatalog,
} from '@sluice/bus';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { createCapturingLogger } from '@sluice/telemetry/testing';
import { startEventHub } from './event-hub.js';

const TENANT = 'acme';
const WATCHED = '00000000-0000-4000-8000-000000000001';
const OTHER = '00000000-0000-4000-8000-000000000002';

let hubConnection: NatsConnection;
let publisher: NatsConnection;
let catalog: BusCatalog;
/** The hub's logger, and the warnings it wrote (JSON lines). */
const { log, lines: warnings } = createCapturingLogger('event-hub-test', 'warn');

before(async () => {
  hubConnection = await connectNats({ url: natsUrl(), name: 'event-hub-test' });
  publisher = await connectNats({ url: natsUrl(), name: 'event-hub-test-publisher' });
  catalog = createBusCatalog(uniquePrefix('event-hub'));
});

after(async () => {
  await closeNats(publisher);
  await closeNats(hubConnection);
});

/** Publishes the notice of event `seq` of `taskId`, as the relay does. */
function publishNotice(taskId: string, seq: number): void {
  publisher.publish(
    catalog.subjects.events(TENANT, taskId),
    encodeMessage({
      type: 'task.event',
      task_id: taskId,
      tenant_id: TENANT,
      seq,
      event: 'step_started',
      from_status: null,
      to_status: null,
      step: 'only',
      at: new Date().toISOString(),
    }),
  );
}

/**
 * How many messages the hub's connection receives while `act` publishes: both connections are
 * flushed, so every message the server routed to the hub has arrived when this returns.
 */
async function messagesReceivedDuring(act: () => void): Promise<number> {
  await hubConnection.flush();
  const before = hubConnection.stats().inMsgs;
  act();
  await publisher.flush();
  await hubConnection.flush();
  return hubConnection.stats().inMsgs - before;
}

describe('event hub', () => {
  it('wakes the watchers of a task with each notice published once listen resolved', async () => {
    const hub = startEventHub(hubConnection, catalog, log, 0);
    const seen: number[] = [];
    const stop = await hub.listen(WATCHED, (seq) => seen.push(seq));
    try {
      const received = await messagesReceivedDuring(() => {
        publishNotice(WATCHED, 1);
        publishNotice(OTHER, 1);
        publishNotice(WATCHED, 2);
      });
      assert.equal(received, 3);
      assert.deepEqual(seen, [1, 2]);
    } finally {
      stop();
      hub.close();
    }
  });

  it('does not decode the notices of tasks nobody here watches', async () => {
    const hub = startEventHub(hubConnection, catalog, log, 0);
    const stop = await hub.listen(WATCHED, () => undefined);
    try {
      warnings.length = 0;
      await messagesReceivedDuring(() => {
        publisher.publish(catalog.subjects.events(TENANT, OTHER), new TextEncoder().encode('{'));
        publisher.publish(catalog.subjects.events(TENANT, WATCHED), new TextEncoder().encode('{'));
      });
      // Only the watched task's malformed notice was read (and refused).
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0] ?? '', new RegExp(WATCHED));
    } finally {
      stop();
      hub.close();
    }
  });

  it('holds no subscription while nobody watches, once the linger has passed', async () => {
    const hub = startEventHub(hubConnection, catalog, log, 0);
    try {
      assert.equal(await messagesReceivedDuring(() => publishNotice(WATCHED, 1)), 0);
      const stop = await hub.listen(WATCHED, () => undefined);
      assert.equal(await messagesReceivedDuring(() => publishNotice(WATCHED, 2)), 1);
      stop();
      // The linger (0 ms here) ends on a timer; the unsubscription reaches the server with the
      // next flush.
      await new Promise((resolve) => setTimeout(resolve, 0));
      assert.equal(await messagesReceivedDuring(() => publishNotice(WATCHED, 3)), 0);
    } finally {
      hub.close();
    }
  });

  it('keeps the subscription through the linger for the next watch', async () => {
    const hub = startEventHub(hubConnection, catalog, log, 60_000);
    try {
      const first = await hub.listen(WATCHED, () => undefined);
      first();
      assert.equal(await messagesReceivedDuring(() => publishNotice(OTHER, 1)), 1);
      const seen: number[] = [];
      const second = await hub.listen(WATCHED, (seq) => seen.push(seq));
      await messagesReceivedDuring(() => publishNotice(WATCHED, 7));
      assert.deepEqual(seen, [7]);
      second();
    } finally {
      hub.close();
    }
  });
});

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  createBusCatalog,
  encodeMessage,
  ensureStepConsumers,
  ensureTopology,
  publishDurable,
} from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import type { Priority } from '@sluice/core';
import { createLogger } from '@sluice/telemetry';
import { startPriorityPuller } from './priority-puller.js';
import { Slots } from './slots.js';

const RESOURCE = 'tool:puller_test';
const quiet = createLogger({
  service: 'puller-test',
  level: 'fatal',
  destination: new Writable({ write: (_chunk, _encoding, done) => done() }),
});

async function eventually(
  condition: () => boolean | Promise<boolean>,
  what: string,
): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The suite's own streams and step consumers on a unique prefix, made before its tests and
 * deleted after them; the getters are valid inside the tests.
 */
function busForSuite(label: string) {
  const catalog = createBusCatalog(uniquePrefix(label));
  let nc: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  before(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
    await ensureTopology(jsm, catalog);
    await ensureStepConsumers(jsm, catalog, RESOURCE);
  });
  after(async () => {
    await nc?.close();
    await deletePrefixResources(natsUrl(), catalog.prefix);
  });
  return {
    catalog,
    nc: () => nc!,
    jsm: () => jsm!,
  };
}

describe('startPriorityPuller when its consumer disappears', () => {
  const bus = busForSuite('puller');
  const { catalog } = bus;

  it('reports the missing consumer, and pulls again once it is recreated', async () => {
    const missing: Priority[] = [];
    const handled: string[] = [];
    const puller = await startPriorityPuller({
      js: jetstream(bus.nc()),
      catalog,
      resource: RESOURCE,
      slots: new Slots(2),
      ackWaitMs: 5_000,
      pullBatch: 1,
      log: quiet,
      onConsumerMissing: (priority) => missing.push(priority),
      handle: async (message) => {
        handled.push(message.string());
        await message.ackAck();
      },
    });
    try {
      const subject = catalog.subjects.step(RESOURCE, 1);
      await bus.jsm().consumers.delete(catalog.streams.steps, catalog.consumers.step(RESOURCE, 1));
      await eventually(() => missing.includes(1), 'the P1 consumer is reported missing');

      // What the executor does on that report: recreate it. The pulls resume by themselves.
      await ensureStepConsumers(bus.jsm(), catalog, RESOURCE);
      const payload = encodeMessage({ type: 'wake', reason: 'after-recreate' });
      await publishDurable(jetstream(bus.nc()), subject, payload, { msgID: 'after-recreate' });
      await eventually(() => handled.length === 1, 'the message after the recreation is handled');
      assert.ok(!missing.includes(0), 'the other priorities were not reported');
    } finally {
      await puller.stop();
    }
  });
});

describe('startPriorityPuller with an urgent reserve', () => {
  const bus = busForSuite('puller-reserve');
  const { catalog } = bus;

  it('keeps the reserved slot from P3 steps and starts a P0 step in it at once', async () => {
    const js = jetstream(bus.nc());
    const started: string[] = [];
    const finish = new Map<string, () => void>();
    let ending = false;
    const puller = await startPriorityPuller({
      js,
      catalog,
      resource: RESOURCE,
      slots: new Slots(3, 1),
      ackWaitMs: 30_000,
      // Batches of two: what waits here still starts in arrival order, and P0 first.
      pullBatch: 2,
      log: quiet,
      // Each step runs until the test lets it finish.
      handle: async (message) => {
        const id = message.string();
        started.push(id);
        if (!ending) await new Promise<void>((resolve) => finish.set(id, resolve));
        message.ack();
      },
    });
    const send = (priority: Priority, id: string) =>
      publishDurable(js, catalog.subjects.step(RESOURCE, priority), new TextEncoder().encode(id), {
        msgID: id,
      });
    try {
      for (let i = 1; i <= 4; i += 1) await send(3, `p3-${i}`);
      await eventually(() => finish.size >= 2, 'two P3 steps run');
      // A third P3 step is buffered, but the last slot is the reserve: it stays free.
      assert.deepEqual(started, ['p3-1', 'p3-2']);

      await send(0, 'p0-1');
      await eventually(() => started.includes('p0-1'), 'the P0 step starts in the reserve');
      assert.deepEqual(started, ['p3-1', 'p3-2', 'p0-1']);

      // P3 steps start again only while more than the reserve is free: two steps must end first.
      finish.get('p3-1')!();
      finish.get('p0-1')!();
      await eventually(() => started.includes('p3-3'), 'the next P3 step takes a freed slot');
      finish.get('p3-2')!();
      await eventually(() => started.includes('p3-4'), 'the last P3 step runs');
      assert.deepEqual(started, ['p3-1', 'p3-2', 'p0-1', 'p3-3', 'p3-4']);
    } finally {
      // Let every step end (also after a failure), or the stop would wait for them forever.
      ending = true;
      for (const done of finish.values()) done();
      await puller.stop();
    }
  });
});

describe('startPriorityPuller with a pull batch', () => {
  const bus = busForSuite('puller-batch');
  const { catalog } = bus;
  const PULL_BATCH = 3;

  /** Publishes P3 messages `p3-<from>` … `p3-<to>`, each its own id. */
  async function publishP3(js: JetStreamClient, from: number, to: number) {
    for (let i = from; i <= to; i += 1) {
      await publishDurable(
        js,
        catalog.subjects.step(RESOURCE, 3),
        new TextEncoder().encode(`p3-${i}`),
        {
          msgID: `batch-p3-${i}`,
        },
      );
    }
  }

  /** A puller of one slot whose first step runs until `finishFirst` is called. */
  async function startBusyPuller(js: JetStreamClient, started: string[]) {
    let finishFirst: (() => void) | undefined;
    const puller = await startPriorityPuller({
      js,
      catalog,
      resource: RESOURCE,
      slots: new Slots(1),
      ackWaitMs: 30_000,
      pullBatch: PULL_BATCH,
      log: quiet,
      handle: async (message) => {
        started.push(message.string());
        if (started.length === 1) await new Promise<void>((resolve) => (finishFirst = resolve));
        message.ack();
      },
    });
    await eventually(() => finishFirst !== undefined, 'the first step runs');
    return { puller, finishFirst: () => finishFirst!() };
  }

  it('takes a batch ahead of its slots, and no more than one batch of a priority', async () => {
    const js = jetstream(bus.nc());
    const info = () =>
      bus.jsm().consumers.info(catalog.streams.steps, catalog.consumers.step(RESOURCE, 3));
    await publishP3(js, 1, 20);
    const started: string[] = [];
    const { puller, finishFirst } = await startBusyPuller(js, started);
    try {
      // Delivered and not acknowledged: the running step and at most a batch waiting here (none
      // waits unread in the client). Watched for a while, since it bounds what keeps coming.
      const bound = 1 + PULL_BATCH;
      let mostDelivered = 0;
      for (let look = 0; look < 20; look += 1) {
        mostDelivered = Math.max(mostDelivered, (await info()).num_ack_pending);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.ok(mostDelivered > 1, `a batch was taken ahead of the slot (${mostDelivered})`);
      assert.ok(mostDelivered <= bound, `${mostDelivered} delivered, at most ${bound} expected`);
      assert.deepEqual(started, ['p3-1']);
    } finally {
      finishFirst();
      await puller.stop();
    }
  });

  it('hands what waits for a slot back on stop, so another executor runs it at once', async () => {
    const js = jetstream(bus.nc());
    await bus
      .jsm()
      .streams.purge(catalog.streams.steps, { filter: catalog.subjects.step(RESOURCE, 3) });
    // One step runs and at most a batch waits (the rest stays in the stream).
    await publishP3(js, 101, 101 + PULL_BATCH);
    const started: string[] = [];
    const { puller, finishFirst } = await startBusyPuller(js, started);
    const waitingHere = Array.from({ length: PULL_BATCH }, (_, i) => `p3-${102 + i}`);
    // Every message delivered before the stop: one still on its way when the pulls close reaches
    // no reader and waits out the ack wait (30 s), which no hand-back can shorten. The consumer's
    // answer comes on the same connection after the deliveries it counts.
    await eventually(async () => {
      const consumer = await bus
        .jsm()
        .consumers.info(catalog.streams.steps, catalog.consumers.step(RESOURCE, 3));
      // Nothing on its way: no pull of this process is open, and what it took waits here.
      return consumer.num_waiting === 0 && consumer.num_ack_pending > 1;
    }, 'the running step and what waits for the slot are delivered');
    const stopping = puller.stop();
    finishFirst();
    await stopping;
    assert.deepEqual(started, ['p3-101'], 'nothing else started while stopping');

    // Without the hand-back these would come again only after the ack wait (30 s, longer than
    // `eventually` waits); handed back, after the pulls' expiry (6 s). JetStream delivers at least
    // once, so one of them may come twice (an executor's start refuses the second).
    const next: string[] = [];
    const other = await startPriorityPuller({
      js,
      catalog,
      resource: RESOURCE,
      slots: new Slots(4),
      ackWaitMs: 30_000,
      pullBatch: PULL_BATCH,
      log: quiet,
      handle: (message) => {
        next.push(message.string());
        message.ack();
        return Promise.resolve();
      },
    });
    try {
      await eventually(
        () => waitingHere.every((name) => next.includes(name)),
        'the other puller runs the waiting batch',
      );
    } finally {
      await other.stop();
    }
    assert.deepEqual([...new Set(next)].sort(), waitingHere);
  });
});

describe('startPriorityPuller with steps longer than the ack wait', () => {
  const ACK_WAIT_MS = 1_000;
  const catalog = createBusCatalog(uniquePrefix('puller-ackwait'));
  let nc: NatsConnection | undefined;
  let jsm: JetStreamManager | undefined;
  before(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
    await ensureTopology(jsm, catalog);
    await ensureStepConsumers(jsm, catalog, RESOURCE, { ackWaitMs: ACK_WAIT_MS });
  });
  after(async () => {
    await nc?.close();
    await deletePrefixResources(natsUrl(), catalog.prefix);
  });

  it('delivers each message once while a full executor holds what it took ahead', async () => {
    const js = jetstream(nc!);
    const count = 4;
    for (let i = 1; i <= count; i += 1) {
      await publishDurable(
        js,
        catalog.subjects.step(RESOURCE, 3),
        new TextEncoder().encode(`s${i}`),
        {
          msgID: `ackwait-s${i}`,
        },
      );
    }
    const handled: string[] = [];
    // One slot and a batch of two: while a step runs (one and a half ack waits, kept alive as the
    // step runner keeps it), the next ones wait for the slot.
    const puller = await startPriorityPuller({
      js,
      catalog,
      resource: RESOURCE,
      slots: new Slots(1),
      ackWaitMs: ACK_WAIT_MS,
      pullBatch: 2,
      log: quiet,
      handle: async (message) => {
        handled.push(`${message.string()}#${message.info.deliveryCount}`);
        const beat = setInterval(() => message.working(), ACK_WAIT_MS / 4);
        await new Promise((resolve) => setTimeout(resolve, 1.5 * ACK_WAIT_MS));
        clearInterval(beat);
        await message.ackAck();
      },
    });
    const info = () =>
      jsm!.consumers.info(catalog.streams.steps, catalog.consumers.step(RESOURCE, 3));
    try {
      await eventually(
        async () => handled.length >= count && (await info()).num_ack_pending === 0,
        'every step ran and nothing is left unacknowledged',
      );
      const consumer = await info();
      assert.deepEqual(handled, ['s1#1', 's2#1', 's3#1', 's4#1']);
      assert.equal(consumer.num_redelivered, 0);
      assert.equal(consumer.delivered.consumer_seq, count, 'no message was delivered twice');
    } finally {
      await puller.stop();
    }
  });
});

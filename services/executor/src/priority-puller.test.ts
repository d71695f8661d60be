import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
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

async function eventually(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
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

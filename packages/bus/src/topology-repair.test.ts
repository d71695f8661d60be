import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { encodeMessage } from './messages.js';
import { publishDurable } from './publish.js';
import { createTopologyRepair, isMissingTopologyError } from './topology-repair.js';
import { ensureStepConsumers, ensureTopology } from './topology.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

describe('isMissingTopologyError', () => {
  const catalog = createBusCatalog(uniquePrefix('repair'));
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  before(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
  });

  after(async () => {
    for (const name of Object.values(catalog.streams)) {
      await jsm.streams.delete(name).catch(() => false);
    }
    await nc.close();
  });

  it('recognises what a server without the stream or consumer answers', async () => {
    const payload = encodeMessage({ type: 'wake', reason: 'test' });
    const publish = await publishDurable(jetstream(nc), catalog.subjects.step('llm', 0), payload, {
      msgID: 'x',
      attempts: 1,
    }).catch((error: unknown) => error);
    assert.ok(isMissingTopologyError(publish), `a publish without a stream: ${String(publish)}`);
    const info = await jsm.streams.info(catalog.streams.steps).catch((error: unknown) => error);
    assert.ok(isMissingTopologyError(info), 'stream info of a missing stream');

    await ensureTopology(jsm, catalog);
    const consumer = await jsm.consumers
      .info(catalog.streams.steps, catalog.consumers.step('llm', 0))
      .catch((error: unknown) => error);
    assert.ok(isMissingTopologyError(consumer), 'consumer info of a missing consumer');
  });

  it('does not take other failures for a missing stream', async () => {
    await ensureTopology(jsm, catalog);
    await ensureStepConsumers(jsm, catalog, 'llm');
    const tooBig = await jetstream(nc)
      .publish(catalog.subjects.step('llm', 1), new Uint8Array(128 * 1024))
      .catch((error: unknown) => error);
    assert.ok(tooBig instanceof Error, 'an oversized message is refused');
    assert.equal(isMissingTopologyError(tooBig), false);
    assert.equal(isMissingTopologyError(new Error('connection refused')), false);
    assert.equal(isMissingTopologyError('stream not found'), false, 'only errors count');
  });
});

describe('createTopologyRepair', () => {
  it('runs one repair at a time and one more for requests made meanwhile', async () => {
    let runs = 0;
    let release: (() => void) | undefined;
    const repair = createTopologyRepair({
      ensure: async () => {
        runs += 1;
        await new Promise<void>((resolve) => (release = resolve));
      },
    });
    repair.request('first');
    repair.request('second');
    repair.request('third');
    assert.equal(runs, 1, 'one at a time');
    release?.();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(runs, 2, 'the requests made meanwhile folded into one more run');
    release?.();
    await repair.idle();
    assert.equal(runs, 2);
    await repair.stop();
  });

  it('retries a failed repair until it succeeds', async () => {
    let attempts = 0;
    const errors: string[] = [];
    const repaired: string[] = [];
    const repair = createTopologyRepair({
      retryMs: 5,
      ensure: () => {
        attempts += 1;
        return attempts < 3 ? Promise.reject(new Error('server down')) : Promise.resolve();
      },
      onError: (error) => errors.push((error as Error).message),
      onRepaired: (reason) => repaired.push(reason),
    });
    repair.request('publish failed');
    await repair.idle();
    assert.equal(attempts, 3);
    assert.deepEqual(errors, ['server down', 'server down']);
    assert.deepEqual(repaired, ['publish failed']);
    await repair.stop();
  });

  it('acts only on errors that say the topology is missing', async () => {
    let runs = 0;
    const repair = createTopologyRepair({
      ensure: () => {
        runs += 1;
        return Promise.resolve();
      },
    });
    assert.equal(repair.noticeError(new Error('timeout'), 'dispatch'), false);
    const gone = new Error('jetstream is not enabled');
    gone.name = 'JetStreamNotEnabled';
    assert.equal(repair.noticeError(new Error('wrapped', { cause: gone }), 'dispatch'), true);
    await repair.idle();
    assert.equal(runs, 1);
    await repair.stop();
  });

  it('stops retrying once stopped', async () => {
    let attempts = 0;
    const repair = createTopologyRepair({
      retryMs: 5,
      ensure: () => {
        attempts += 1;
        return Promise.reject(new Error('server down'));
      },
    });
    repair.request('x');
    await repair.stop();
    const after = attempts;
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(attempts, after);
  });
});

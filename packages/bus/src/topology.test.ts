import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect, nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { SluiceErrorCode, isSluiceError } from '@sluice/core';
import { decodeStepAdvisory } from './advisories.js';
import { nextOrNull } from './fetch.js';
import { createBusCatalog } from './catalog.js';
import type { BusCatalog } from './catalog.js';
import { stepConsumerSpec, stepsStreamSpec } from './specs.js';
import {
  ensureConsumer,
  ensureDeadLetterConsumer,
  ensureStepConsumers,
  ensureStream,
  ensureTopology,
  openKvBuckets,
} from './topology.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

/** Every stream a catalog's topology may create. */
function streamsOf(c: BusCatalog): string[] {
  return [
    c.streams.steps,
    c.streams.events,
    c.streams.advisories,
    `KV_${c.buckets.leases}`,
    `KV_${c.buckets.governor}`,
  ];
}

async function dropStreams(jsm: JetStreamManager, catalogs: BusCatalog[]): Promise<void> {
  for (const name of catalogs.flatMap(streamsOf)) {
    await jsm.streams.delete(name).catch(() => false);
  }
}

describe('topology', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const used: BusCatalog[] = [];
  const catalog = (label: string): BusCatalog => {
    const c = createBusCatalog(uniquePrefix(label));
    used.push(c);
    return c;
  };

  before(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
  });

  after(async () => {
    await dropStreams(jsm, used);
    await nc.close();
  });

  it('creates the three streams, and is idempotent when run twice at once', async () => {
    const c = catalog('topo');
    const reports = await Promise.all([ensureTopology(jsm, c), ensureTopology(jsm, c)]);
    for (const name of [c.streams.steps, c.streams.events, c.streams.advisories]) {
      // Both may say "created": the server accepts re-adding an identical stream.
      for (const r of reports) assert.ok(r[name] === 'created' || r[name] === 'unchanged', name);
      assert.ok(
        reports.some((r) => r[name] === 'created'),
        name,
      );
    }
    const again = await ensureTopology(jsm, c);
    assert.deepEqual(Object.values(again), ['unchanged', 'unchanged', 'unchanged']);

    const steps = await jsm.streams.info(c.streams.steps);
    assert.equal(steps.config.retention, 'workqueue');
    assert.equal(steps.config.discard, 'new');
    assert.deepEqual(steps.config.subjects, [c.subjects.stepsAll]);
    const events = await jsm.streams.info(c.streams.events);
    assert.equal(events.config.retention, 'limits');
    assert.ok(events.config.duplicate_window <= events.config.max_age);
  });

  it('updates a stream whose settings changed, and refuses an impossible change', async () => {
    const c = catalog('topo_upd');
    await ensureTopology(jsm, c);
    const changed = await ensureTopology(jsm, c, { steps: { maxMsgs: 42 } });
    assert.equal(changed[c.streams.steps], 'updated');
    assert.equal((await jsm.streams.info(c.streams.steps)).config.max_msgs, 42);

    const impossible = { ...stepsStreamSpec(c), retention: 'limits' as const };
    await assert.rejects(ensureStream(jsm, impossible), (err: unknown) =>
      isSluiceError(err, SluiceErrorCode.FailedPrecondition),
    );
  });

  it('takes "subjects overlap" from a peer creating the same stream as that race, and converges', async () => {
    // On 2.9 a peer's create of the same stream can be answered 10065 instead of being handed the
    // stream (see `overlapping` in topology.ts); the race is too narrow to provoke on demand, so a
    // stand-in manager lets the peer win and then answers as the server did in CI.
    const c = catalog('topo_race');
    const spec = stepsStreamSpec(c);
    const racing: JetStreamManager = Object.create(jsm) as JetStreamManager;
    Object.defineProperty(racing, 'streams', {
      value: Object.assign(Object.create(jsm.streams) as JetStreamManager['streams'], {
        add: async (config: typeof spec) => {
          await jsm.streams.add(config);
          throw new JetStreamApiError({
            code: 400,
            err_code: 10065,
            description: 'subjects overlap with an existing stream',
          });
        },
      }),
    });
    assert.equal(await ensureStream(racing, spec), 'unchanged');
    assert.deepEqual((await jsm.streams.info(spec.name)).config.subjects, spec.subjects);
  });

  it('refuses a stream whose subjects another stream takes, naming them, and creates nothing', async () => {
    const c = catalog('topo_overlap');
    const spec = stepsStreamSpec(c);
    const squatter = `${spec.name}_OTHER`;
    await jsm.streams.add({ name: squatter, subjects: spec.subjects });
    try {
      await assert.rejects(ensureStream(jsm, spec), (err: unknown) => {
        assert.ok(isSluiceError(err, SluiceErrorCode.FailedPrecondition), String(err));
        assert.match(
          (err as Error).message,
          new RegExp(spec.subjects[0]!.replace(/[.*>]/g, '\\$&')),
        );
        return true;
      });
      await assert.rejects(jsm.streams.info(spec.name), /stream not found/);
    } finally {
      await jsm.streams.delete(squatter);
    }
  });

  it('refuses a KV bucket whose subjects another stream takes, naming them, and creates nothing', async () => {
    const c = catalog('topo_kv_overlap');
    const subject = `$KV.${c.buckets.leases}.>`;
    const squatter = `${c.streams.steps}_KV_SQUATTER`;
    await jsm.streams.add({ name: squatter, subjects: [subject] });
    try {
      await assert.rejects(openKvBuckets(nc, c, { leaseTtlMs: 1_500 }), (err: unknown) => {
        assert.ok(isSluiceError(err, SluiceErrorCode.FailedPrecondition), String(err));
        assert.ok((err as Error).message.includes(subject), (err as Error).message);
        return true;
      });
      await assert.rejects(jsm.streams.info(`KV_${c.buckets.leases}`), /stream not found/);
    } finally {
      await jsm.streams.delete(squatter);
    }
  });

  it('creates four consumers per resource with disjoint filters, concurrently and idempotently', async () => {
    const c = catalog('topo_cons');
    await ensureTopology(jsm, c);
    const [a, b] = await Promise.all([
      ensureStepConsumers(jsm, c, 'tool:http', { maxAckPending: 8 }),
      ensureStepConsumers(jsm, c, 'tool:http', { maxAckPending: 8 }),
    ]);
    assert.deepEqual(a, b);
    await ensureStepConsumers(jsm, c, 'llm');
    const infos = [];
    for await (const ci of jsm.consumers.list(c.streams.steps)) infos.push(ci);
    assert.equal(infos.length, 8);
    const http = infos.filter((ci) => ci.name.includes('tool__http'));
    assert.deepEqual(http.map((ci) => ci.config.filter_subject).sort(), [
      c.subjects.step('tool:http', 0),
      c.subjects.step('tool:http', 1),
      c.subjects.step('tool:http', 2),
      c.subjects.step('tool:http', 3),
    ]);
    for (const ci of http) assert.equal(ci.config.max_ack_pending, 8);

    const spec = stepConsumerSpec(c, 'llm', 3);
    assert.equal(await ensureConsumer(jsm, c.streams.steps, spec), 'unchanged');

    // A changed setting reaches the existing consumers.
    await ensureStepConsumers(jsm, c, 'tool:http', { maxAckPending: 8, maxDeliver: 9 });
    const p0 = await jsm.consumers.info(c.streams.steps, c.consumers.step('tool:http', 0));
    assert.equal(p0.config.max_deliver, 9);
  });

  it('opens both KV buckets concurrently, and brings a changed lease TTL to the bucket', async () => {
    const c = catalog('topo_kv');
    const [one, two] = await Promise.all([
      openKvBuckets(nc, c, { leaseTtlMs: 1_500 }),
      openKvBuckets(nc, c, { leaseTtlMs: 1_500 }),
    ]);
    assert.equal((await one.leases.status()).ttl, 1_500);
    assert.equal((await one.governor.status()).ttl, 0);
    assert.equal((await two.leases.status()).history, 1);
    await one.governor.put('level', '"normal"');
    assert.equal((await two.governor.get('level'))?.string(), '"normal"');

    const reopened = await openKvBuckets(nc, c, { leaseTtlMs: 4_000 });
    assert.equal((await reopened.leases.status()).ttl, 4_000);
    const info = await jsm.streams.info(`KV_${c.buckets.leases}`);
    assert.equal(info.config.max_age, nanos(4_000));

    await assert.rejects(openKvBuckets(nc, c, { leaseTtlMs: 10 }), (err: unknown) =>
      isSluiceError(err, SluiceErrorCode.InvalidArgument),
    );
  });

  it('brings a shortened lease TTL to the bucket, whose duplicate window follows it', async () => {
    // The server sets a new bucket's duplicate window to its TTL when under two minutes, and
    // refuses a max age below the duplicate window (10052).
    const c = catalog('topo_kv_down');
    await openKvBuckets(nc, c, { leaseTtlMs: 4_000 });
    const reopened = await openKvBuckets(nc, c, { leaseTtlMs: 1_500 });
    assert.equal((await reopened.leases.status()).ttl, 1_500);
    const info = await jsm.streams.info(`KV_${c.buckets.leases}`);
    assert.equal(info.config.max_age, nanos(1_500));
    assert.equal(info.config.duplicate_window, nanos(1_500));
  });

  it('persists the dead-letter advisories of step consumers in the advisories stream', async () => {
    const c = catalog('topo_adv');
    await ensureTopology(jsm, c);
    await ensureStepConsumers(jsm, c, 'llm', { ackWaitMs: 1_000, maxDeliver: 1 });
    const js = jetstream(nc);
    const deadSeq = (await js.publish(c.subjects.step('llm', 0), 'dies')).seq;
    const termSeq = (await js.publish(c.subjects.step('llm', 1), 'poison')).seq;

    const p0 = await js.consumers.get(c.streams.steps, c.consumers.step('llm', 0));
    assert.ok(await p0.next({ expires: 2_000 }), 'the p0 message is delivered once, never acked');
    const p1 = await js.consumers.get(c.streams.steps, c.consumers.step('llm', 1));
    const poison = await p1.next({ expires: 2_000 });
    assert.ok(poison);
    poison.term();
    // On 2.9 the server notices max deliveries only when it would redeliver, i.e. when someone pulls
    // after the ack wait: an executor always is, so pull once more (and get nothing).
    assert.equal(await nextOrNull(p0, 2_500), null);

    const durable = await ensureDeadLetterConsumer(jsm, c);
    const deadLetters = await js.consumers.get(c.streams.advisories, durable);
    const advisories = [];
    const deadline = Date.now() + 10_000;
    while (advisories.length < 2 && Date.now() < deadline) {
      const m = await nextOrNull(deadLetters, 1_000);
      if (m === null) continue;
      advisories.push(decodeStepAdvisory(m.subject, m.data));
      await m.ackAck();
    }
    assert.equal(advisories.length, 2, 'both advisories reached the dead-letter consumer');
    const byKind = new Map(advisories.map((a) => [a.kind, a]));
    assert.equal(byKind.get('max_deliveries')?.stream_seq, deadSeq);
    assert.equal(byKind.get('max_deliveries')?.consumer, c.consumers.step('llm', 0));
    assert.equal(byKind.get('terminated')?.stream_seq, termSeq);
    // A max-delivered message stays in the work queue (to be copied, then deleted); a terminated
    // one is gone (NATS-NOTES.md §4).
    assert.ok(await jsm.streams.getMessage(c.streams.steps, { seq: deadSeq }));
    assert.equal(await jsm.streams.getMessage(c.streams.steps, { seq: termSeq }), null);
  });
});

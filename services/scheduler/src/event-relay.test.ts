/**
 * The event relay's batches against real Postgres and JetStream: published events wait for their
 * marks, which go with the first read once due (one round trip a batch), a batch runs for marks
 * alone when no read comes, every event reaches the stream once and in order, and a publication
 * that fails or is retried holds its task's later events back (unsent) until it is stored.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  decodeMessageOf,
  ensureTopology,
  type BusCatalog,
} from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  appendTaskEvent,
  createTask,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import {
  createTestDatabase,
  migratedTemplate,
  startTurnCounter,
  type TestDatabase,
} from '@sluice/db/testing';
import { createLogger, createMetrics, type Metrics } from '@sluice/telemetry';
import {
  createEventRelay,
  MARK_WAIT_MS,
  type EventRelay,
  type EventRelayDeps,
} from './event-relay.js';
import { TaskHistory } from './task-history.js';

const manifest: TaskTypeManifest = {
  name: 'relay-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'tool:relay', timeoutMs: 1_000, maxAttempts: 1 }],
};
const log = createLogger({ service: 'event-relay-test', level: 'silent' });

let database: TestDatabase;
let handle: DatabaseHandle;
let nc: NatsConnection;
let jsm: JetStreamManager;
const prefixes: string[] = [];

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, manifest);
  nc = await connectNats({ url: natsUrl(), name: 'event-relay-test' });
  jsm = await jetstreamManager(nc);
});

after(async () => {
  await closeNats(nc);
  for (const prefix of prefixes) await deletePrefixResources(natsUrl(), prefix);
  await handle?.close();
  await database?.drop();
});

/** A catalog of its own, its streams created. */
async function freshCatalog(): Promise<BusCatalog> {
  const prefix = uniquePrefix('relay');
  prefixes.push(prefix);
  const catalog = createBusCatalog(prefix);
  await ensureTopology(jsm, catalog);
  return catalog;
}

/** A new task (its `create` event unpublished); its id. */
async function newTask(): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  return task.id;
}

/** One more event of the task; its sequence. */
const progress = (taskId: string) => appendTaskEvent(handle.db, { taskId, type: 'step_progress' });

/** `task:seq` of every event marked published (gone from the outbox), in id order. */
async function markedEvents(): Promise<string[]> {
  const rows = await handle.sql<{ event: string }[]>`
    select task_id || ':' || seq as event from task_events e
    where not exists (select 1 from task_event_outbox o where o.event_id = e.id) order by id`;
  return rows.map((row) => row.event);
}

/** `task:seq` of every notice on the catalog's events stream, in stream order. */
async function streamedEvents(catalog: BusCatalog): Promise<string[]> {
  const info = await jsm.streams.info(catalog.streams.events);
  const events: string[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && seq > 0; seq++) {
    const message = await jsm.streams.getMessage(catalog.streams.events, { seq });
    if (!message) throw new Error(`no message ${seq} on the events stream`);
    const notice = decodeMessageOf('task.event', message.subject, message.data);
    events.push(`${notice.task_id}:${notice.seq}`);
  }
  return events;
}

async function relayedCount(metrics: Metrics): Promise<number> {
  const { values } = await metrics.eventsRelayed.get();
  return values.reduce((sum, { value }) => sum + value, 0);
}

/** A relay of its own over `catalog`, with what a test chooses in `options`. */
function relayOf(catalog: BusCatalog, options: Partial<EventRelayDeps> = {}): EventRelay {
  return createEventRelay({
    db: handle.db,
    js: jetstream(nc),
    catalog,
    log,
    metrics: createMetrics(),
    batchSize: 10,
    taskHistory: new TaskHistory(),
    ...options,
  });
}

/** Runs batches until one reads nothing and nothing is left to mark. */
async function relayAll(relay: EventRelay): Promise<void> {
  for (;;) {
    const report = await relay.runBatch();
    if (report.handled === 0 && relay.unmarked === 0) return;
  }
}

describe('event relay', () => {
  it('reads without marking while marks wait, marks them with the first read once due, one round trip a batch', async () => {
    await relayAll(relayOf(await freshCatalog())); // what earlier tests left
    const proxy = await startTurnCounter(database.url);
    const through = openDatabase(proxy.url, { max: 1 });
    const catalog = await freshCatalog();
    const metrics = createMetrics();
    let clock = 0;
    const relay = relayOf(catalog, { db: through.db, metrics, now: () => clock });
    try {
      const taskId = await newTask();
      // Prepares the three statements on the connection (a statement's first use asks for its
      // parameters' types first): the read, a read leaving one event out, marks with a read.
      assert.deepEqual(await relay.runBatch(), { more: false, handled: 1, dueInMs: MARK_WAIT_MS });
      await progress(taskId);
      clock = 10;
      assert.deepEqual(await relay.runBatch(), {
        more: false,
        handled: 1,
        dueInMs: MARK_WAIT_MS - 10,
      });
      clock = MARK_WAIT_MS;
      assert.deepEqual(await relay.runBatch(), { more: false, handled: 0, idle: true });
      assert.deepEqual(await markedEvents(), [`${taskId}:1`, `${taskId}:2`]);

      await progress(taskId);
      proxy.reset();
      clock = 200;
      assert.deepEqual(await relay.runBatch(), { more: false, handled: 1, dueInMs: MARK_WAIT_MS });
      await progress(taskId);
      clock = 250;
      assert.deepEqual(
        await relay.runBatch(),
        { more: false, handled: 1, dueInMs: 50 },
        'the fourth event read and published; both marks due 100 ms after the third',
      );
      assert.equal(proxy.turns(), 2, 'one round trip a batch');
      assert.deepEqual(
        await markedEvents(),
        [`${taskId}:1`, `${taskId}:2`],
        'reads while the marks wait write nothing',
      );
      assert.equal(relay.unmarked, 2);
      assert.equal(await relayedCount(metrics), 2, 'events count as relayed once marked');

      clock = 299;
      assert.deepEqual(await relay.runBatch(), { more: false, handled: 0, dueInMs: 1 });
      assert.equal(relay.unmarked, 2, 'not due yet');
      proxy.reset();
      clock = 300;
      assert.deepEqual(await relay.runBatch(), { more: false, handled: 0, idle: true });
      assert.equal(proxy.turns(), 1, 'due: the marks with the read, one statement');
      assert.deepEqual(
        await markedEvents(),
        [1, 2, 3, 4].map((seq) => `${taskId}:${seq}`),
      );
      assert.equal(relay.unmarked, 0);
      assert.equal(await relayedCount(metrics), 4);
      assert.deepEqual(
        await streamedEvents(catalog),
        [1, 2, 3, 4].map((seq) => `${taskId}:${seq}`),
        'each event on the stream once, in order',
      );
    } finally {
      await through.close();
      await proxy.close();
    }
  });

  it('marks at once when a batch of publications waits, and what it published when flushed', async () => {
    const catalog = await freshCatalog();
    const metrics = createMetrics();
    const relay = relayOf(catalog, { metrics, batchSize: 2, now: () => 0 });
    await relayAll(relayOf(catalog, { batchSize: 2 })); // what earlier tests left
    const taskId = await newTask();
    await progress(taskId);
    await progress(taskId);
    const first = await relay.runBatch();
    assert.equal(first.more, true, 'a full batch: more may wait');
    assert.deepEqual(await relay.runBatch(), {
      more: false,
      handled: 1,
      dueInMs: MARK_WAIT_MS,
    });
    assert.deepEqual(
      (await markedEvents()).slice(-2),
      [`${taskId}:1`, `${taskId}:2`],
      'a batch of marks went with the next read, the wait notwithstanding',
    );
    await relay.flush();
    assert.equal(relay.unmarked, 0);
    const marked = await markedEvents();
    assert.deepEqual(marked.slice(-3), [`${taskId}:1`, `${taskId}:2`, `${taskId}:3`]);
    assert.deepEqual(await streamedEvents(catalog), [`${taskId}:1`, `${taskId}:2`, `${taskId}:3`]);
    assert.equal(await relayedCount(metrics), 3);
    await relay.flush();
    assert.equal(await relayedCount(metrics), 3, 'a flush with nothing to mark counts nothing');
  });

  it('leaves the events of a publication that failed unpublished, and publishes them in order once it can', async () => {
    const catalog = await freshCatalog();
    const relay = relayOf(catalog);
    await relayAll(relay); // what earlier tests left
    const taskId = await newTask();
    await progress(taskId);
    await jsm.streams.delete(catalog.streams.events);
    const failed: unknown[] = [];
    const failing = relayOf(catalog, { onPublishFailed: (error) => failed.push(error) });
    const report = await failing.runBatch();
    assert.equal(report.handled, 2);
    assert.equal(report.dueInMs, undefined, 'nothing published, so nothing to mark');
    assert.equal(failing.unmarked, 0);
    assert.ok(failed.length > 0, 'the failed publications were reported');
    assert.ok(!(await markedEvents()).includes(`${taskId}:1`), 'the events stay unpublished');

    await ensureTopology(jsm, catalog);
    await relayAll(failing);
    assert.deepEqual(await streamedEvents(catalog), [`${taskId}:1`, `${taskId}:2`]);
    assert.deepEqual((await markedEvents()).slice(-2), [`${taskId}:1`, `${taskId}:2`]);
  });

  it("keeps a task's events in order on the stream when an earlier publication needs a retry", async () => {
    const catalog = await freshCatalog();
    await relayAll(relayOf(catalog)); // what earlier tests left
    const taskId = await newTask();
    await progress(taskId);
    // The first attempt at the task's first event gets no responder (JetStream electing a
    // leader); publishDurable tries it again after its backoff, while the second went at once.
    const relay = relayOf(catalog, {
      js: jetstreamFailingOnce(`${taskId}:e1`, () => {
        const error = new Error('jetstream not enabled');
        error.name = 'JetStreamNotEnabled';
        return error;
      }),
    });
    await relayAll(relay);
    assert.deepEqual(await streamedEvents(catalog), [`${taskId}:1`, `${taskId}:2`]);
  });

  it("publishes none of a task's later events in a batch after one of its publications failed", async () => {
    const catalog = await freshCatalog();
    await relayAll(relayOf(catalog)); // what earlier tests left
    const taskId = await newTask();
    await progress(taskId);
    const other = await newTask();
    const failed: unknown[] = [];
    const relay = relayOf(catalog, {
      js: jetstreamFailingOnce(`${taskId}:e1`, () => new Error('refused')),
      onPublishFailed: (error) => failed.push(error),
    });
    await relay.runBatch();
    assert.equal(failed.length, 1);
    assert.deepEqual(
      await streamedEvents(catalog),
      [`${other}:1`],
      'the second event waits for the first; the other task is not held back',
    );
    await relayAll(relay);
    assert.deepEqual(await streamedEvents(catalog), [`${other}:1`, `${taskId}:1`, `${taskId}:2`]);
    assert.deepEqual((await markedEvents()).slice(-3), [
      `${taskId}:1`,
      `${taskId}:2`,
      `${other}:1`,
    ]);
  });

  it('counts an event once when the relays of two lease tenures both publish and mark it', async () => {
    const catalog = await freshCatalog();
    await relayAll(relayOf(catalog)); // what earlier tests left
    const taskId = await newTask();
    const oldMetrics = createMetrics();
    const old = relayOf(catalog, { metrics: oldMetrics, now: () => 0 });
    await old.runBatch(); // published; its mark waits, and then the lease is lost
    const nextMetrics = createMetrics();
    // The next holder publishes it again, and marks it.
    await relayAll(relayOf(catalog, { metrics: nextMetrics }));
    await old.flush(); // the old tenure's end marks it too
    assert.deepEqual(await streamedEvents(catalog), [`${taskId}:1`], 'stored once');
    assert.equal(await relayedCount(nextMetrics), 1);
    assert.equal(await relayedCount(oldMetrics), 0, 'the event was marked already');

    await progress(taskId);
    const oldAgain = relayOf(catalog, { metrics: oldMetrics, now: () => 0 });
    await oldAgain.runBatch(); // the second event published, its mark waiting for the flush
    await relayAll(relayOf(catalog, { metrics: nextMetrics }));
    let clock = 0;
    const reading = relayOf(catalog, { metrics: oldMetrics, now: () => clock });
    await progress(taskId);
    await reading.runBatch(); // the third event published, its mark waiting
    await relayAll(relayOf(catalog, { metrics: nextMetrics }));
    clock = MARK_WAIT_MS;
    await reading.runBatch(); // its mark goes with a read, after the other relay's
    assert.equal(
      await relayedCount(nextMetrics),
      3,
      'the second and third counted by the next holder',
    );
    assert.equal(
      await relayedCount(oldMetrics),
      0,
      'marks with a read count only what they took out',
    );
    await oldAgain.flush();
    assert.equal(await relayedCount(oldMetrics), 0);
  });
});

/** The test's JetStream client, whose first publication of `msgID` fails with `error()`. */
function jetstreamFailingOnce(msgID: string, error: () => Error): JetStreamClient {
  const js = jetstream(nc);
  let failed = false;
  return new Proxy(js, {
    get(target, property, receiver) {
      if (property !== 'publish') return Reflect.get(target, property, receiver) as unknown;
      return (...args: Parameters<JetStreamClient['publish']>) => {
        if (!failed && args[2]?.msgID === msgID) {
          failed = true;
          return Promise.reject(error());
        }
        return target.publish(...args);
      };
    },
  });
}

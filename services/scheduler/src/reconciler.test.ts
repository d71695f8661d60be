/**
 * The reconciler against the real Postgres and NATS: a fresh database and a steps stream of a
 * unique prefix per test. The passage of time is simulated by moving `dispatched_at` and
 * `heartbeat_at` into the past, so no test sleeps; messages are lost by purging the stream.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  dispatchMsgId,
  ensureTopology,
  type BusCatalog,
} from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  claimReadySteps,
  createTask,
  createTenant,
  deadLettersOfTask,
  findStep,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  startStep,
  type DatabaseHandle,
  type StepRecord,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { dispatchBatch } from './dispatcher.js';
import { createReconciler, type Reconciler, type ReconcilerDeps } from './reconciler.js';

const manifest: TaskTypeManifest = {
  name: 'reconcile-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

const GRACE_MS = 10_000;
const STALE_MS = 45_000;
const ACK_WAIT_MS = 30_000;
const log = createLogger({ service: 'reconciler-test', level: 'silent' });

/** One test's world: database, stream, a task whose first step is ready, and the reconciler. */
interface World extends AsyncDisposable {
  readonly handle: DatabaseHandle;
  readonly jsm: JetStreamManager;
  readonly catalog: BusCatalog;
  readonly taskId: string;
  readonly reconciler: Reconciler;
  /** Claims and publishes what is ready, as the scheduler's dispatcher does. */
  dispatch(): Promise<void>;
  step(): Promise<StepRecord>;
  /** Moves the step's dispatch and heartbeat times `ms` into the past. */
  age(ms: number, column: 'dispatched_at' | 'heartbeat_at'): Promise<void>;
}

async function world(overrides: Partial<ReconcilerDeps> = {}): Promise<World> {
  const database: TestDatabase = await createTestDatabase({
    template: await migratedTemplate(migrateDatabase),
  });
  const handle = openDatabase(database.url, { max: 4 });
  const prefix = uniquePrefix('reconciler');
  let nc: NatsConnection | undefined;
  try {
    nc = await connectNats({ url: natsUrl(), name: 'reconciler-test' });
    const jsm = await jetstreamManager(nc);
    const catalog = createBusCatalog(prefix);
    await ensureTopology(jsm, catalog);
    const js = jetstream(nc);
    await createTenant(handle.db, { id: 'acme' });
    await registerTaskType(handle.db, manifest);
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const metrics = createMetrics();
    const connection = nc;
    const reconciler = createReconciler({
      db: handle.db,
      jsm,
      catalog,
      log,
      batchSize: 50,
      graceMs: GRACE_MS,
      staleMs: STALE_MS,
      maxDispatches: 10,
      ...overrides,
    });
    return {
      handle,
      jsm,
      catalog,
      taskId: task.id,
      reconciler,
      async dispatch() {
        await dispatchBatch({ db: handle.db, js, catalog, log, metrics, batchSize: 50 });
      },
      async step() {
        const step = await findStep(handle.db, task.id, 1);
        assert.ok(step, 'the task has its first step');
        return step;
      },
      async age(ms, column) {
        await handle.sql.unsafe(
          `update task_steps set ${column} = ${column} - make_interval(secs => $1) where task_id = $2`,
          [ms / 1_000, task.id],
        );
      },
      async [Symbol.asyncDispose]() {
        await closeNats(connection);
        await deletePrefixResources(natsUrl(), prefix);
        await handle.close();
        await database.drop();
      },
    };
  } catch (error) {
    if (nc) await closeNats(nc);
    await handle.close();
    await database.drop();
    throw error;
  }
}

/** The dispatch message of the step's current dispatch is in the stream at its publish sequence. */
async function assertPublished(w: World, step: StepRecord): Promise<void> {
  assert.ok(step.publishSeq !== null, 'the publication is recorded');
  const message = await w.jsm.streams.getMessage(w.catalog.streams.steps, {
    seq: step.publishSeq,
  });
  assert.ok(message, 'the message is in the stream');
  assert.equal(
    message.header.get('Nats-Msg-Id'),
    dispatchMsgId(step.taskId, step.seq, step.dispatchCount),
  );
}

describe('reconciler', () => {
  it('dispatches again a step claimed and never published, after the grace period', async () => {
    await using w = await world();
    // The scheduler claimed the step and died before publishing it.
    await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
    assert.deepEqual(await w.reconciler.reconcileBatch(), {
      requeued: 0,
      failed: 0,
      inStream: 0,
      more: false,
    });
    assert.equal((await w.step()).status, 'dispatched', 'within the grace period: left alone');

    await w.age(GRACE_MS + 1_000, 'dispatched_at');
    const result = await w.reconciler.reconcileBatch();
    assert.equal(result.requeued, 1);
    const requeued = await w.step();
    assert.equal(requeued.status, 'ready');
    assert.ok(requeued.dueAt.getTime() <= Date.now() + 1_000, 'due now');

    await w.dispatch();
    const redispatched = await w.step();
    assert.equal(redispatched.status, 'dispatched');
    assert.equal(redispatched.dispatchCount, 2, 'a new dispatch number');
    await assertPublished(w, redispatched);
  });

  it('dispatches again a running step whose message was purged and whose heartbeat is stale', async () => {
    await using w = await world();
    await w.dispatch();
    const first = await w.step();
    await assertPublished(w, first);
    const ref = { taskId: w.taskId, seq: 1, dispatch: 1 };
    assert.ok(await startStep(w.handle.db, ref, ACK_WAIT_MS), 'an executor started it');
    await w.jsm.streams.purge(w.catalog.streams.steps);
    await w.age(STALE_MS + 1_000, 'heartbeat_at');
    await w.age(STALE_MS + 1_000, 'dispatched_at');

    assert.equal((await w.reconciler.reconcileBatch()).requeued, 1);
    assert.equal((await w.step()).status, 'ready');
    await w.dispatch();
    const redispatched = await w.step();
    assert.equal(redispatched.dispatchCount, 2);
    assert.notEqual(redispatched.publishSeq, first.publishSeq);
    await assertPublished(w, redispatched);
  });

  it('dispatches again a dispatched step whose message was purged', async () => {
    await using w = await world();
    await w.dispatch();
    await w.jsm.streams.purge(w.catalog.streams.steps);
    await w.age(STALE_MS + 1_000, 'dispatched_at');
    assert.equal((await w.reconciler.reconcileBatch()).requeued, 1);
    await w.dispatch();
    assert.equal((await w.step()).dispatchCount, 2);
  });

  it('leaves a step claimed again after an earlier run alone within the grace period', async () => {
    await using w = await world();
    // The step ran before (a failure with attempts left, or a lost run the reconciler gave back):
    // its heartbeat is from that run, long ago. It was just claimed again; its publication is not
    // recorded yet.
    await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
    await w.handle.sql`
      update task_steps set heartbeat_at = now() - make_interval(secs => ${(STALE_MS + 60_000) / 1_000})
      where task_id = ${w.taskId}`;
    assert.deepEqual(await w.reconciler.reconcileBatch(), {
      requeued: 0,
      failed: 0,
      inStream: 0,
      more: false,
    });
    const step = await w.step();
    assert.equal(step.status, 'dispatched', 'an old run says nothing about this dispatch');
    assert.equal(step.dispatchCount, 1);
  });

  it('leaves a silent step alone while its message is still in the stream', async () => {
    await using w = await world();
    await w.dispatch();
    await w.age(STALE_MS + 1_000, 'dispatched_at');
    assert.deepEqual(await w.reconciler.reconcileBatch(), {
      requeued: 0,
      failed: 0,
      inStream: 1,
      more: false,
    });
    const step = await w.step();
    assert.equal(step.status, 'dispatched');
    assert.equal(step.dispatchCount, 1);
  });

  it('treats a message of an older dispatch at the recorded sequence as lost', async () => {
    await using w = await world();
    await w.dispatch();
    // Dispatch 1's message stays in the stream; dispatch 2 is claimed and never published, so the
    // recorded sequence still names dispatch 1's message.
    await w.handle.sql`update task_steps set status = 'ready' where task_id = ${w.taskId}`;
    await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
    await w.age(STALE_MS + 1_000, 'dispatched_at');
    assert.equal((await w.reconciler.reconcileBatch()).requeued, 1);
    await w.dispatch();
    const step = await w.step();
    assert.equal(step.dispatchCount, 3);
    await assertPublished(w, step);
  });

  it('leaves a running step with a fresh heartbeat alone, even without its message', async () => {
    await using w = await world();
    await w.dispatch();
    assert.ok(await startStep(w.handle.db, { taskId: w.taskId, seq: 1, dispatch: 1 }, ACK_WAIT_MS));
    await w.jsm.streams.purge(w.catalog.streams.steps);
    await w.age(STALE_MS + 1_000, 'dispatched_at');
    assert.equal((await w.reconciler.reconcileBatch()).requeued, 0);
    const step = await w.step();
    assert.equal(step.status, 'running');
    assert.equal(step.dispatchCount, 1);
  });

  for (const request of ['cancel_requested', 'pause_requested'] as const) {
    it(`gives a lost step of a task with ${request} back, where the claim leaves it alone`, async () => {
      await using w = await world();
      await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
      await w.handle.sql`update tasks set ${w.handle.sql(request)} = true where id = ${w.taskId}`;
      await w.age(GRACE_MS + 1_000, 'dispatched_at');
      // Left in flight, it would keep the settler from completing the cancel or pause for good.
      assert.equal((await w.reconciler.reconcileBatch()).requeued, 1);
      assert.equal((await w.step()).status, 'ready');
      assert.deepEqual(await w.handle.db.transaction((tx) => claimReadySteps(tx, 10)), []);
    });
  }

  it('fails a lost step whose dispatches reached the cap, with a dead letter', async () => {
    const metrics = createMetrics();
    await using w = await world({ maxDispatches: 3, metrics });
    for (let dispatch = 1; dispatch <= 3; dispatch += 1) {
      await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
      assert.equal((await w.step()).dispatchCount, dispatch);
      await w.age(GRACE_MS + 1_000, 'dispatched_at');
      const result = await w.reconciler.reconcileBatch();
      assert.deepEqual(
        [result.requeued, result.failed],
        dispatch < 3 ? [1, 0] : [0, 1],
        `after dispatch ${dispatch}`,
      );
    }
    const step = await w.step();
    assert.equal(step.status, 'failed');
    assert.equal(step.outcomeAppliedAt, null, 'the outcome waits for the scheduler to apply it');
    assert.deepEqual(step.outcome, {
      type: 'failed',
      error: {
        errorClass: 'unknown',
        message: 'dispatched 3 times without an outcome',
        retryable: false,
      },
    });
    const events = await w.handle.sql<{ type: string }[]>`
      select type from task_events where task_id = ${w.taskId} order by seq`;
    assert.deepEqual(
      events.map((event) => event.type).filter((type) => type.startsWith('step_')),
      ['step_redispatched', 'step_redispatched', 'step_failed'],
    );
    // Poison work ends as a dead letter, written with the failed outcome.
    const letters = await deadLettersOfTask(w.handle.db, w.taskId);
    assert.equal(letters.length, 1);
    assert.equal(letters[0]?.reason, 'max_deliveries');
    assert.equal(letters[0]?.stepSeq, 1);
    assert.equal(letters[0]?.step, 'work');
    assert.equal(letters[0]?.attempts, 3);
    assert.equal(letters[0]?.streamSeq, null);
    const counted = (await metrics.deadLetterCount.get()).values;
    assert.equal(counted.find((v) => v.labels['reason'] === 'max_deliveries')?.value, 1);
  });

  it('scans a long list of candidates page by page', async () => {
    await using w = await world({ batchSize: 1 });
    await w.handle.db.transaction((tx) => claimReadySteps(tx, 10));
    await w.age(GRACE_MS + 1_000, 'dispatched_at');
    const first = await w.reconciler.reconcileBatch();
    assert.deepEqual([first.requeued, first.more], [1, true]);
    const second = await w.reconciler.reconcileBatch();
    assert.deepEqual([second.requeued, second.more], [0, false], 'past the end: starts over');
  });
});

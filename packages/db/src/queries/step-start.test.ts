/**
 * The one-statement step start against the real Postgres: a queued task starts (the table's `start`
 * transition and its event), a running task records `step_started`, the step sees earlier outputs
 * and the latest approval, and every case that needs a decision changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { and, eq, sql } from 'drizzle-orm';
import type { DatabaseHandle } from '../client.js';
import { taskSteps, tasks } from '../schema.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { appendTaskEvent } from './events.js';
import { startUsualSteps } from './step-start.js';
import type { StepDispatchRef } from './steps.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, listTaskEvents } from './tasks.js';

const manifest: TaskTypeManifest = {
  name: 'start-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'plan',
  steps: ['plan', 'write'].map((name) => ({
    name,
    resource: 'tool:x',
    timeoutMs: 1_000,
    maxAttempts: 3,
  })),
};

/** Long enough that a step running elsewhere counts as alive in these tests. */
const STALE_AFTER_MS = 60_000;

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme'],
    manifests: [manifest],
    max: 4,
  });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** A new task whose first step is dispatched (dispatch 1), as the scheduler leaves it. */
async function dispatchedTask(): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: { topic: 'x' },
  });
  await handle.db
    .update(taskSteps)
    .set({ status: 'dispatched', dispatchCount: 1 })
    .where(eq(taskSteps.taskId, task.id));
  return task.id;
}

const first = (taskId: string): StepDispatchRef => ({ taskId, seq: 1, dispatch: 1 });

/** Starts one dispatch alone (a group of one, as an idle executor starts it). */
async function startUsualStep(ref: StepDispatchRef, staleAfterMs: number) {
  const [start] = await startUsualSteps(handle.db, [ref], staleAfterMs);
  return start;
}

async function taskRow(taskId: string) {
  const [row] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
  assert.ok(row);
  return row;
}

async function stepRow(taskId: string, seq: number) {
  const [row] = await handle.db
    .select()
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.seq, seq)));
  assert.ok(row);
  return row;
}

describe('startUsualStep', () => {
  it('starts a queued task: the step runs, the task is running, a start event records it', async () => {
    const taskId = await dispatchedTask();
    const before = await taskRow(taskId);
    const result = await startUsualStep(first(taskId), STALE_AFTER_MS);
    assert.ok(result?.started);
    assert.equal(result.task.status, 'queued', 'the task as it was read, before the start');
    assert.equal(result.step.status, 'running');
    assert.equal(result.step.attempts, 1);
    assert.ok(result.step.startedAt instanceof Date);
    assert.deepEqual(result.outputs, {});
    assert.equal(result.approval, undefined);

    const after = await taskRow(taskId);
    assert.equal(after.status, 'running');
    assert.equal(after.currentStep, 'plan');
    assert.equal(after.version, before.version + 1);
    assert.equal(after.lastEventSeq, before.lastEventSeq + 1);
    assert.equal(after.attempt, before.attempt);
    assert.ok(after.startedAt instanceof Date);
    assert.equal(after.finishedAt, null);
    const events = await listTaskEvents(handle.db, taskId, 0);
    const last = events.at(-1);
    assert.equal(last?.type, 'start');
    assert.equal(last?.seq, after.lastEventSeq);
    assert.equal(last?.fromStatus, 'queued');
    assert.equal(last?.toStatus, 'running');
    assert.equal(last?.step, 'plan');
    assert.deepEqual(last?.data, { seq: 1, attempt: 1 });
    const step = await stepRow(taskId, 1);
    assert.equal(step.status, 'running');
    assert.ok(step.heartbeatAt instanceof Date);
  });

  it('starts a later step of a running task with a step_started fact, showing what came before', async () => {
    const taskId = await dispatchedTask();
    assert.ok((await startUsualStep(first(taskId), STALE_AFTER_MS))?.started);
    await handle.db
      .update(taskSteps)
      .set({ status: 'succeeded', outcome: { type: 'complete', output: { plan: 'p' } } })
      .where(eq(taskSteps.taskId, taskId));
    await handle.db.insert(taskSteps).values({
      taskId,
      seq: 2,
      name: 'write',
      resource: 'tool:x',
      tenantId: 'acme',
      priority: 2,
      status: 'dispatched',
      dispatchCount: 1,
      input: {},
    });
    await appendTaskEvent(handle.db, { taskId, type: 'approve', data: { comment: 'go on' } });
    const before = await taskRow(taskId);

    const result = await startUsualStep({ taskId, seq: 2, dispatch: 1 }, STALE_AFTER_MS);
    assert.ok(result?.started);
    assert.deepEqual(result.outputs, { plan: { plan: 'p' } });
    assert.equal(result.approval?.comment, 'go on');
    assert.ok(result.approval?.decidedAt instanceof Date);

    const after = await taskRow(taskId);
    assert.equal(after.status, 'running');
    assert.equal(after.version, before.version, 'a fact, not a transition');
    assert.equal(after.currentStep, before.currentStep);
    assert.equal(after.lastEventSeq, before.lastEventSeq + 1);
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.type, 'step_started');
    assert.equal(last?.fromStatus, null);
    assert.equal(last?.step, 'write');
    assert.deepEqual(last?.data, { seq: 2, attempt: 1 });
  });

  /** Asserts that a start changed nothing: same task row, same step row. */
  async function assertUnchanged(taskId: string, ref: StepDispatchRef): Promise<void> {
    const taskBefore = await taskRow(taskId);
    const stepBefore = await stepRow(taskId, ref.seq);
    const result = await startUsualStep(ref, STALE_AFTER_MS);
    assert.equal(result?.started, false);
    assert.equal(result.task.id, taskId);
    assert.deepEqual(await taskRow(taskId), taskBefore);
    assert.deepEqual(await stepRow(taskId, ref.seq), stepBefore);
  }

  for (const flag of ['cancelRequested', 'pauseRequested', 'approvalPending'] as const) {
    it(`changes nothing for a task with ${flag} (the careful path decides)`, async () => {
      const taskId = await dispatchedTask();
      await handle.db
        .update(tasks)
        .set({ [flag]: true })
        .where(eq(tasks.id, taskId));
      await assertUnchanged(taskId, first(taskId));
    });
  }

  it('changes nothing for a task that is neither queued nor running', async () => {
    const taskId = await dispatchedTask();
    await handle.db.update(tasks).set({ status: 'paused' }).where(eq(tasks.id, taskId));
    await assertUnchanged(taskId, first(taskId));
  });

  it('changes nothing for a stale dispatch or a step running elsewhere, and takes over a dead one', async () => {
    const taskId = await dispatchedTask();
    await assertUnchanged(taskId, { taskId, seq: 1, dispatch: 2 });
    assert.ok((await startUsualStep(first(taskId), STALE_AFTER_MS))?.started);
    await assertUnchanged(taskId, first(taskId)); // its executor is alive: a redelivery waits
    await handle.db
      .update(taskSteps)
      .set({ heartbeatAt: sql`now() - interval '2 minutes'` })
      .where(eq(taskSteps.taskId, taskId));
    const takeover = await startUsualStep(first(taskId), STALE_AFTER_MS);
    assert.ok(takeover?.started);
    assert.equal(takeover.step.attempts, 2);
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.type, 'step_started', 'the task runs already');
  });

  it('records the stream sequence of the message the dispatch came in, unless it has none', async () => {
    const delivered = await dispatchedTask();
    const bare = await dispatchedTask();
    await startUsualSteps(
      handle.db,
      [{ ...first(delivered), publishSeq: 4_321 }, first(bare)],
      STALE_AFTER_MS,
    );
    assert.equal((await stepRow(delivered, 1)).publishSeq, 4_321);
    assert.equal((await stepRow(bare, 1)).publishSeq, null, 'nothing known, nothing written');
  });

  it('answers undefined for an unknown task', async () => {
    const ref = { taskId: '00000000-0000-4000-8000-000000000000', seq: 1, dispatch: 1 };
    assert.equal(await startUsualStep(ref, STALE_AFTER_MS), undefined);
  });
});

describe('startUsualSteps', () => {
  it('starts the steps of several tasks in one statement, answering each in order', async () => {
    const one = await dispatchedTask();
    const two = await dispatchedTask();
    const paused = await dispatchedTask();
    await handle.db.update(tasks).set({ status: 'paused' }).where(eq(tasks.id, paused));
    const unknown = { taskId: '00000000-0000-4000-8000-000000000001', seq: 1, dispatch: 1 };
    const malformed = { taskId: 'not-a-uuid', seq: 2 ** 40, dispatch: 1 };
    const results = await startUsualSteps(
      handle.db,
      [
        first(two),
        unknown,
        first(paused),
        first(one),
        { taskId: one, seq: 1, dispatch: 7 },
        malformed,
      ],
      STALE_AFTER_MS,
    );
    assert.equal(results.length, 6);
    assert.equal(results[5], undefined, 'no task has such an id: the others start all the same');
    assert.ok(results[0]?.started);
    assert.equal(results[0].task.id, two);
    assert.equal(results[1], undefined, 'no such task');
    assert.equal(results[2]?.started, false, 'a paused task needs the careful path');
    assert.ok(results[3]?.started);
    assert.equal(results[3].task.id, one);
    assert.equal(results[4]?.started, false, 'a stale dispatch of a step that started');
    for (const taskId of [one, two]) {
      assert.equal((await taskRow(taskId)).status, 'running');
      const events = await listTaskEvents(handle.db, taskId, 0);
      assert.deepEqual(
        events.map((e) => e.type),
        ['create', 'start'],
      );
    }
    assert.equal((await taskRow(paused)).status, 'paused');
  });

  it('starts two steps of a queued task at once: the first starts it, the second is a fact', async () => {
    const taskId = await dispatchedTask();
    await handle.db.insert(taskSteps).values({
      taskId,
      seq: 2,
      name: 'write',
      resource: 'tool:x',
      tenantId: 'acme',
      priority: 2,
      status: 'dispatched',
      dispatchCount: 1,
      input: {},
    });
    const before = await taskRow(taskId);
    const results = await startUsualSteps(
      handle.db,
      [{ taskId, seq: 2, dispatch: 1 }, first(taskId)],
      STALE_AFTER_MS,
    );
    assert.ok(results.every((result) => result?.started));
    const after = await taskRow(taskId);
    assert.equal(after.status, 'running');
    assert.equal(after.currentStep, 'write', 'the step that started the task');
    assert.equal(after.version, before.version + 1, 'one transition');
    assert.equal(after.lastEventSeq, before.lastEventSeq + 2);
    const events = (await listTaskEvents(handle.db, taskId, 0)).slice(-2);
    assert.deepEqual(
      events.map((e) => [e.seq, e.type, e.step, e.fromStatus, e.toStatus]),
      [
        [before.lastEventSeq + 1, 'start', 'write', 'queued', 'running'],
        [before.lastEventSeq + 2, 'step_started', 'plan', null, null],
      ],
    );
  });
});

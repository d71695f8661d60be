/**
 * Recording step outcomes against the real Postgres: one statement for many steps (the executor's
 * group commit), each with its event in its task's sequence, stale dispatches left alone, and the
 * usual completion applied in the same statement exactly as the scheduler's outcome pass applies it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { and, eq } from 'drizzle-orm';
import type { StepOutcome } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { taskSteps, tasks } from '../schema.js';
import type { Transaction } from '../client.js';
import { applyLockedTransitions, applyTransition } from '../transition.js';
import { startContinuation } from './continuations.js';
import { eventsAsWritten, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { appendTaskEvent } from './events.js';
import {
  markOutcomesApplied,
  recordStepOutcome,
  recordStepOutcomes,
  type StepDispatchRef,
} from './steps.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, listTaskEvents, lockTask, type TaskRecord } from './tasks.js';

const manifest: TaskTypeManifest = {
  name: 'outcomes-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'tool:x', timeoutMs: 1_000, maxAttempts: 3 }],
};

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

/** A task whose step `seq` runs under dispatch 1 (more steps: the branches of a fan-out). */
async function runningTask(extraSteps = 0): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  for (let seq = 2; seq <= extraSteps + 1; seq++) {
    await handle.db.insert(taskSteps).values({
      taskId: task.id,
      seq,
      name: 'work',
      resource: 'tool:x',
      tenantId: 'acme',
      priority: 2,
      status: 'ready',
      input: {},
    });
  }
  await handle.db
    .update(taskSteps)
    .set({ status: 'running', dispatchCount: 1 })
    .where(eq(taskSteps.taskId, task.id));
  return task.id;
}

const done = (output: string): StepOutcome => ({ type: 'complete', output });
const failed: StepOutcome = {
  type: 'failed',
  error: { errorClass: 'external_5xx', message: 'tool said 503', retryable: true },
};

async function stepRow(taskId: string, seq: number) {
  const [row] = await handle.db
    .select()
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.seq, seq)));
  return row;
}

describe('recordStepOutcomes', () => {
  it('records many steps of many tasks in one go, each event next in its task’s sequence', async () => {
    const fanned = await runningTask(2); // steps 1, 2, 3 of one task
    const single = await runningTask();
    const ref = (taskId: string, seq: number): StepDispatchRef => ({ taskId, seq, dispatch: 1 });
    const recorded = await kinds([
      { ref: ref(fanned, 2), outcome: done('b') },
      { ref: ref(single, 1), outcome: failed },
      { ref: ref(fanned, 1), outcome: done('a') },
      { ref: ref(fanned, 3), outcome: { type: 'cancelled' } },
    ]);
    // The task is still queued (nothing started it here): no outcome completes it.
    assert.deepEqual(recorded, ['recorded', 'recorded', 'recorded', 'recorded']);

    assert.equal((await stepRow(fanned, 1))?.status, 'succeeded');
    assert.deepEqual((await stepRow(fanned, 2))?.outcome, done('b'));
    assert.equal((await stepRow(fanned, 3))?.status, 'cancelled');
    const failedRow = await stepRow(single, 1);
    assert.equal(failedRow?.status, 'failed');
    assert.deepEqual(failedRow?.outcome, failed);
    assert.ok(failedRow?.finishedAt);
    assert.equal(failedRow?.outcomeAppliedAt, null);

    // The create event is 1; the three outcomes follow in the order they were given.
    const events = (await listTaskEvents(handle.db, fanned, 0)).map((e) => [
      e.seq,
      e.type,
      e.data?.['seq'],
    ]);
    assert.deepEqual(events, [
      [1, 'create', undefined],
      [2, 'step_succeeded', 2],
      [3, 'step_succeeded', 1],
      [4, 'step_cancelled', 3],
    ]);
    const singleEvents = await listTaskEvents(handle.db, single, 0);
    assert.deepEqual(
      singleEvents.map((e) => [e.seq, e.type, e.data]),
      [
        [1, 'create', { priority: 2, type: 'outcomes-test' }],
        [2, 'step_failed', { seq: 1, error: 'tool said 503' }],
      ],
    );
    // Later events of the tasks continue the sequence.
    assert.equal(await appendTaskEvent(handle.db, { taskId: fanned, type: 'note' }), 5);
  });

  it('leaves stale dispatches alone and says which they were', async () => {
    const taskId = await runningTask(1);
    assert.equal(
      await recordStepOutcome(handle.db, { taskId, seq: 1, dispatch: 1 }, done('first')),
      true,
    );
    const recorded = await kinds([
      { ref: { taskId, seq: 1, dispatch: 1 }, outcome: done('again') }, // recorded already
      { ref: { taskId, seq: 2, dispatch: 2 }, outcome: done('other') }, // another dispatch's
      { ref: { taskId, seq: 2, dispatch: 1 }, outcome: done('second') },
    ]);
    assert.deepEqual(recorded, ['stale', 'stale', 'recorded']);
    assert.deepEqual((await stepRow(taskId, 1))?.outcome, done('first'));
    assert.deepEqual((await stepRow(taskId, 2))?.outcome, done('second'));
    const types = (await listTaskEvents(handle.db, taskId, 0)).map((e) => `${e.seq}:${e.type}`);
    assert.deepEqual(types, ['1:create', '2:step_succeeded', '3:step_succeeded']);
    assert.deepEqual(await recordStepOutcomes(handle.db, []), []);
  });
});

/** A task that runs its first step under dispatch 1, as the executor's start leaves it. */
async function startedTask(): Promise<string> {
  const taskId = await runningTask();
  await handle.db
    .update(tasks)
    .set({ status: 'running', currentStep: 'work', progress: 0.5, progressMessage: 'half' })
    .where(eq(tasks.id, taskId));
  return taskId;
}

/** What {@link recordStepOutcomes} did, by kind. */
async function kinds(outcomes: Parameters<typeof recordStepOutcomes>[1]): Promise<string[]> {
  return (await recordStepOutcomes(handle.db, outcomes)).map((recording) => recording.kind);
}

/** What applying an outcome wrote, without what differs between two tasks by nature. */
async function written(taskId: string) {
  const [task] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
  assert.ok(task);
  const { id: _id, createdAt: _c, updatedAt: _u, finishedAt, traceId: _t, ...rest } = task;
  const { traceParent: _p, startedAt: _s, ...columns } = rest;
  const steps = await handle.db
    .select()
    .from(taskSteps)
    .where(eq(taskSteps.taskId, taskId))
    .orderBy(taskSteps.seq);
  return {
    columns,
    finishedAt: finishedAt !== null,
    steps: steps.map((step) => {
      const { id: _i, taskId: _task, createdAt: _created, dueAt, finishedAt: done, ...kept } = step;
      const { startedAt: _started, heartbeatAt: _beat, outcomeAppliedAt, ...same } = kept;
      return {
        ...same,
        due: dueAt !== null,
        finished: done !== null,
        applied: outcomeAppliedAt !== null,
      };
    }),
    events: await eventsAsWritten(handle.db, taskId),
  };
}

/**
 * The twin the old way: its outcome recorded while a flag keeps it for the scheduler, then applied
 * as the outcome pass applies it (`apply`, in a transaction with the task locked), and marked.
 */
async function appliedByThePass(
  taskId: string,
  outcome: StepOutcome,
  apply: (tx: Transaction, locked: TaskRecord) => Promise<void>,
): Promise<void> {
  await handle.db.update(tasks).set({ pauseRequested: true }).where(eq(tasks.id, taskId));
  assert.deepEqual(await kinds([{ ref: ref(taskId), outcome }]), ['recorded']);
  await handle.db.update(tasks).set({ pauseRequested: false }).where(eq(tasks.id, taskId));
  await handle.db.transaction(async (tx) => {
    const locked = await lockTask(tx, taskId);
    assert.ok(locked);
    await apply(tx, locked);
    const step = await stepRow(taskId, 1);
    await markOutcomesApplied(tx, [step?.id ?? 0]);
  });
}

const ref = (taskId: string): StepDispatchRef => ({ taskId, seq: 1, dispatch: 1 });

describe('the usual completion', () => {
  for (const output of [{ answer: 42 }, null, 'text']) {
    it(`completes the task as the scheduler's pass would (output ${JSON.stringify(output)})`, async () => {
      const here = await startedTask();
      const twin = await startedTask();
      const outcome: StepOutcome = { type: 'complete', output };

      assert.deepEqual(await kinds([{ ref: ref(here), outcome }]), ['completed']);
      // outcome-applier.ts: `completion`, applied with the others by applyLockedTransitions.
      await appliedByThePass(twin, outcome, async (tx, locked) => {
        const [result] = await applyLockedTransitions(tx, [
          {
            taskId: twin,
            step: 'work',
            event: { type: 'complete' },
            patch: { currentStep: null, output, error: null },
            locked,
          },
        ]);
        assert.equal(result?.ok, true);
      });

      const mine = await written(here);
      assert.deepEqual(mine, await written(twin));
      assert.equal(mine.columns.status, 'succeeded');
      assert.deepEqual(mine.columns.output, output);
      assert.equal(mine.steps[0]?.applied, true);
      assert.deepEqual(
        mine.events.map((e) => `${e.seq}:${e.type}`),
        ['1:create', '2:step_succeeded', '3:complete'],
      );
    });
  }
});

describe('the usual continuation', () => {
  for (const input of [{ page: 2 }, 'text', []]) {
    it(`adds the next step and continues the task as the pass would (input ${JSON.stringify(input)})`, async () => {
      const here = await startedTask();
      const twin = await startedTask();
      const outcome: StepOutcome = { type: 'next', step: 'work', input, output: 'page 1' };

      const [recording] = await recordStepOutcomes(handle.db, [{ ref: ref(here), outcome }]);
      assert.deepEqual(recording, {
        kind: 'continued',
        next: { seq: 2, name: 'work', resource: 'tool:x', priority: 2 },
      });
      // outcome-applier.ts, `next`: startContinuation, then the `continue` transition.
      await appliedByThePass(twin, outcome, async (tx, locked) => {
        const started = await startContinuation(
          tx,
          locked,
          { type: 'next', step: 'work', input },
          { seq: 1, fanOutOf: null, branchIndex: null },
        );
        assert.ok(started.ok);
        const result = await applyTransition(tx, {
          taskId: twin,
          step: 'work',
          event: { type: 'continue' },
          data: { next: started.steps },
          patch: { currentStep: started.label },
        });
        assert.equal(result.ok, true);
      });

      const mine = await written(here);
      assert.deepEqual(mine, await written(twin));
      assert.equal(mine.columns.status, 'running');
      assert.equal(mine.columns.currentStep, 'work');
      assert.deepEqual(
        mine.steps.map((step) => [step.seq, step.status, step.applied]),
        [
          [1, 'succeeded', true],
          [2, 'ready', false],
        ],
      );
      assert.deepEqual(mine.steps[1]?.input, input);
      assert.deepEqual(
        mine.events.map((e) => `${e.seq}:${e.type}`),
        ['1:create', '2:step_succeeded', '3:continue'],
      );
    });
  }
});

describe('outcomes left to the scheduler', () => {
  it('are every other kind, and those of tasks that are not usual', async () => {
    const cancelling = await startedTask();
    await handle.db.update(tasks).set({ cancelRequested: true }).where(eq(tasks.id, cancelling));
    const failing = await startedTask();
    const branch = await startedTask();
    await handle.db
      .update(taskSteps)
      .set({ fanOutOf: 0, branchIndex: 0 })
      .where(eq(taskSteps.taskId, branch));
    const twoSteps = await runningTask(1);
    await handle.db.update(tasks).set({ status: 'running' }).where(eq(tasks.id, twoSteps));
    const undeclared = await startedTask();
    const nullInput = await startedTask();
    const fanningOut = await startedTask();
    const usual = await startedTask();

    const recorded = await kinds([
      { ref: ref(cancelling), outcome: done('late') },
      { ref: ref(failing), outcome: failed },
      { ref: ref(branch), outcome: done('branch') },
      { ref: ref(twoSteps), outcome: done('one') },
      { ref: { taskId: twoSteps, seq: 2, dispatch: 1 }, outcome: done('two') },
      { ref: ref(undeclared), outcome: { type: 'next', step: 'nope', input: {}, output: 1 } },
      { ref: ref(nullInput), outcome: { type: 'next', step: 'work', input: null, output: 1 } },
      {
        ref: ref(fanningOut),
        outcome: {
          type: 'fanOut',
          branches: [{ step: 'work', input: {} }],
          join: 'work',
          output: 1,
        },
      },
      { ref: ref(usual), outcome: done('usual') },
      { ref: ref(usual), outcome: done('again') }, // the same dispatch twice: stale
    ]);
    // `usual` appears twice in the input, so even it is left to the scheduler: an outcome that
    // applies must be its task's only outcome of the statement.
    assert.deepEqual(recorded, [...Array<string>(9).fill('recorded'), 'stale']);
    for (const taskId of [
      cancelling,
      failing,
      branch,
      twoSteps,
      undeclared,
      nullInput,
      fanningOut,
      usual,
    ]) {
      const [task] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
      assert.equal(task?.status, 'running', taskId);
      assert.equal((await stepRow(taskId, 1))?.outcomeAppliedAt, null, taskId);
    }
    // No step was added for the continuations left to the scheduler.
    for (const taskId of [undeclared, nullInput, fanningOut]) {
      assert.equal(await stepRow(taskId, 2), undefined, taskId);
    }

    const alone = await startedTask();
    const beside = await startedTask();
    assert.deepEqual(
      await kinds([
        { ref: ref(alone), outcome: done('a') },
        { ref: ref(beside), outcome: failed },
      ]),
      ['completed', 'recorded'],
    );
    const events = (await listTaskEvents(handle.db, alone, 0)).map((e) => `${e.seq}:${e.type}`);
    assert.deepEqual(events, ['1:create', '2:step_succeeded', '3:complete']);
    // The task's next event follows its completion.
    assert.equal(await appendTaskEvent(handle.db, { taskId: alone, type: 'note' }), 4);
  });
});

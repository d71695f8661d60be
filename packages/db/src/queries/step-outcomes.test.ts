/**
 * Recording step outcomes against the real Postgres: one write for many steps (the executor's
 * group commit), each with its event in its task's sequence, stale dispatches left alone, and the
 * usual outcomes (completion, continuation, fan-out, a branch's completion and the join) applied
 * in the same write exactly as the scheduler's outcome pass applies them, on twin tasks.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { and, eq, sql } from 'drizzle-orm';
import { continuationOf, type StepOutcome } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { taskSteps, tasks } from '../schema.js';
import type { Transaction } from '../client.js';
import { applyLockedTransitions, applyTransition } from '../transition.js';
import { joinIfComplete, startContinuation } from './continuations.js';
import { eventsAsWritten, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { appendTaskEvent } from './events.js';
import type { StepDispatchRef } from './steps.js';
import { markOutcomesApplied } from './unapplied-outcomes.js';
import {
  recordStepOutcome,
  recordStepOutcomes,
  recordStepOutcomesIn,
  type OutcomeToRecord,
} from './step-outcomes.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, listTaskEvents, lockTask, type TaskRecord } from './tasks.js';

const manifest: TaskTypeManifest = {
  name: 'outcomes-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [
    { name: 'work', resource: 'tool:x', timeoutMs: 1_000, maxAttempts: 3 },
    { name: 'merge', resource: 'tool:y', timeoutMs: 1_000, maxAttempts: 3 },
  ],
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
      await handle.db.transaction((tx) =>
        recordStepOutcome(tx, { taskId, seq: 1, dispatch: 1 }, done('first')),
      ),
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
        added: [{ seq: 2, name: 'work', resource: 'tool:x', priority: 2 }],
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
          branches: [
            { step: 'work', input: {} },
            { step: 'nope', input: {} },
          ],
          join: 'merge',
          output: 1,
        },
      },
      { ref: ref(usual), outcome: done('usual') },
      { ref: ref(usual), outcome: done('again') }, // the same dispatch twice: stale
    ]);
    // Two steps outside any branch of one task are not usual (one of them would be a branch).
    // The same dispatch twice: the first outcome counts, the second is stale.
    assert.deepEqual(recorded, [...Array<string>(8).fill('recorded'), 'completed', 'stale']);
    for (const taskId of [
      cancelling,
      failing,
      branch,
      twoSteps,
      undeclared,
      nullInput,
      fanningOut,
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

/** The outcome of step `seq` of a task, under dispatch 1. */
const at = (taskId: string, seq: number, outcome: StepOutcome): OutcomeToRecord => ({
  ref: { taskId, seq, dispatch: 1 },
  outcome,
});

/** A fan-out of step 1 into `work` branches (inputs `{ n }`), joined by `merge`. */
const fanOut = (branches: number): StepOutcome => ({
  type: 'fanOut',
  branches: Array.from({ length: branches }, (_, n) => ({ step: 'work', input: { n } })),
  join: 'merge',
  output: 'split',
});

/** A started task whose first step fanned out (applied here), with its branches running. */
async function fannedOutTask(branches: number): Promise<string> {
  const taskId = await startedTask();
  assert.deepEqual(await kinds([at(taskId, 1, fanOut(branches))]), ['continued']);
  await handle.db
    .update(taskSteps)
    .set({ status: 'running', dispatchCount: 1 })
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.status, 'ready')));
  return taskId;
}

/**
 * The twin the old way for any outcomes: recorded while a flag keeps them for the scheduler, then
 * applied one by one in the order of their steps, as the outcome pass applies a task's several
 * outcomes (each `apply` with the task locked again), and marked.
 */
async function appliedOneByOne(
  outcomes: readonly OutcomeToRecord[],
  apply: (tx: Transaction, locked: TaskRecord, applying: OutcomeToRecord) => Promise<void>,
): Promise<void> {
  const taskId = outcomes[0]?.ref.taskId ?? '';
  await handle.db.update(tasks).set({ pauseRequested: true }).where(eq(tasks.id, taskId));
  assert.ok((await kinds(outcomes)).every((kind) => kind === 'recorded'));
  await handle.db.update(tasks).set({ pauseRequested: false }).where(eq(tasks.id, taskId));
  const bySeq = [...outcomes].sort((a, b) => a.ref.seq - b.ref.seq);
  await handle.db.transaction(async (tx) => {
    for (const applying of bySeq) {
      const locked = await lockTask(tx, taskId);
      assert.ok(locked);
      await apply(tx, locked, applying);
    }
    const ids = await Promise.all(
      bySeq.map(async ({ ref }) => (await stepRow(taskId, ref.seq))?.id),
    );
    await markOutcomesApplied(
      tx,
      ids.map((id) => id ?? 0),
    );
  });
}

/** outcome-applier.ts, `complete` of a branch: the join when every branch is done, `continue`. */
async function branchCompletedByThePass(
  tx: Transaction,
  locked: TaskRecord,
  { ref }: OutcomeToRecord,
): Promise<void> {
  const step = await stepRow(locked.id, ref.seq);
  assert.ok(step?.fanOutOf !== null && step?.fanOutOf !== undefined);
  const join = await joinIfComplete(tx, locked, step.fanOutOf);
  const result = await applyTransition(tx, {
    taskId: locked.id,
    step: step.name,
    event: { type: 'continue' },
    data: { branch: step.branchIndex, ...(join ? { join: join.name } : {}) },
    ...(join ? { patch: { currentStep: join.name } } : {}),
  });
  assert.equal(result.ok, true);
}

/** outcome-applier.ts, `next` / `fanOut`: startContinuation, then the `continue` transition. */
async function continuedByThePass(
  tx: Transaction,
  locked: TaskRecord,
  { ref, outcome }: OutcomeToRecord,
): Promise<void> {
  const step = await stepRow(locked.id, ref.seq);
  assert.ok(step);
  const continuation = continuationOf(outcome);
  assert.ok(continuation);
  const started = await startContinuation(tx, locked, continuation, {
    seq: step.seq,
    fanOutOf: step.fanOutOf,
    branchIndex: step.branchIndex,
  });
  assert.ok(started.ok);
  const result = await applyTransition(tx, {
    taskId: locked.id,
    step: step.name,
    event: { type: 'continue' },
    data: { next: started.steps },
    patch: { currentStep: started.label },
  });
  assert.equal(result.ok, true);
}

describe('fan-outs', () => {
  it('adds the branches and continues the task as the pass would', async () => {
    const here = await startedTask();
    const twin = await startedTask();

    const [recording] = await recordStepOutcomes(handle.db, [at(here, 1, fanOut(3))]);
    assert.deepEqual(recording, {
      kind: 'continued',
      added: [2, 3, 4].map((seq) => ({ seq, name: 'work', resource: 'tool:x', priority: 2 })),
    });
    await appliedOneByOne([at(twin, 1, fanOut(3))], continuedByThePass);

    const mine = await written(here);
    assert.deepEqual(mine, await written(twin));
    assert.equal(mine.columns.currentStep, 'work ×3');
    assert.deepEqual(
      mine.steps.map((step) => [step.seq, step.status, step.fanOutOf, step.branchIndex]),
      [
        [1, 'succeeded', null, null],
        [2, 'ready', 1, 0],
        [3, 'ready', 1, 1],
        [4, 'ready', 1, 2],
      ],
    );
    assert.deepEqual(mine.steps[3]?.input, { n: 2 });
    assert.deepEqual(mine.events.at(-1)?.data, { next: ['work', 'work', 'work'] });
  });

  it('completes a branch, and with the last one adds the join, as the pass would', async () => {
    const here = await fannedOutTask(2);
    const twin = await fannedOutTask(2);
    const first = (taskId: string) => at(taskId, 3, done('second branch'));
    const last = (taskId: string) => at(taskId, 2, done('first branch'));

    // A branch done before others: the task goes on, nothing is added, its step stays.
    assert.deepEqual(await recordStepOutcomes(handle.db, [first(here)]), [
      { kind: 'continued', added: [] },
    ]);
    await appliedOneByOne([first(twin)], branchCompletedByThePass);
    assert.deepEqual(await written(here), await written(twin));
    assert.equal((await written(here)).columns.currentStep, 'work ×2');

    // The last branch: the join, with the outputs in branch order.
    assert.deepEqual(await recordStepOutcomes(handle.db, [last(here)]), [
      {
        kind: 'continued',
        added: [{ seq: 4, name: 'merge', resource: 'tool:y', priority: 2 }],
      },
    ]);
    await appliedOneByOne([last(twin)], branchCompletedByThePass);
    const mine = await written(here);
    assert.deepEqual(mine, await written(twin));
    assert.equal(mine.columns.currentStep, 'merge');
    assert.deepEqual(mine.steps[3]?.input, { outputs: ['first branch', 'second branch'] });
    assert.equal(mine.steps[3]?.joinOf, 1);
    assert.deepEqual(
      mine.events.slice(-2).map((event) => [event.type, event.data]),
      [
        ['step_succeeded', { seq: 2 }],
        ['continue', { branch: 0, join: 'merge' }],
      ],
    );
  });

  it('applies several branch outcomes of one task in one write, in the order of their steps', async () => {
    const here = await fannedOutTask(3);
    const twin = await fannedOutTask(3);
    // Given out of order; one branch goes on to a second step, so no join yet.
    const outcomes = (taskId: string) => [
      at(taskId, 4, done('third')),
      at(taskId, 2, { type: 'next', step: 'work', input: { again: true }, output: 'first, half' }),
      at(taskId, 3, done('second')),
    ];
    const recordings = await recordStepOutcomes(handle.db, outcomes(here));
    assert.deepEqual(
      recordings.map((recording) => recording.kind),
      ['continued', 'continued', 'continued'],
    );
    // The added step is told with the task's last outcome (its last step, seq 4).
    assert.deepEqual(recordings[0], {
      kind: 'continued',
      added: [{ seq: 5, name: 'work', resource: 'tool:x', priority: 2 }],
    });
    await appliedOneByOne(outcomes(twin), (tx, locked, applying) =>
      applying.outcome.type === 'next'
        ? continuedByThePass(tx, locked, applying)
        : branchCompletedByThePass(tx, locked, applying),
    );
    const mine = await written(here);
    assert.deepEqual(mine, await written(twin));
    // The next step stays in its branch.
    assert.deepEqual(
      [mine.steps[4]?.fanOutOf, mine.steps[4]?.branchIndex, mine.steps[4]?.status],
      [1, 0, 'ready'],
    );
    assert.deepEqual(
      mine.events.slice(-6).map((event) => [event.type, event.data]),
      [
        ['step_succeeded', { seq: 4 }],
        ['step_succeeded', { seq: 2 }],
        ['step_succeeded', { seq: 3 }],
        ['continue', { next: ['work'] }],
        ['continue', { branch: 1 }],
        ['continue', { branch: 2 }],
      ],
    );

    // The branch's second step completes it, the last branch: the join.
    await handle.db
      .update(taskSteps)
      .set({ status: 'running', dispatchCount: 1 })
      .where(and(eq(taskSteps.taskId, here), eq(taskSteps.seq, 5)));
    const [joined] = await recordStepOutcomes(handle.db, [at(here, 5, done('first'))]);
    assert.deepEqual(joined, {
      kind: 'continued',
      added: [{ seq: 6, name: 'merge', resource: 'tool:y', priority: 2 }],
    });
    assert.deepEqual((await stepRow(here, 6))?.input, { outputs: ['first', 'second', 'third'] });
  });

  it('adds the join when the last branches finish in one write, with the first of them', async () => {
    const here = await fannedOutTask(2);
    const twin = await fannedOutTask(2);
    const outcomes = (taskId: string) => [at(taskId, 3, done('b')), at(taskId, 2, done('a'))];
    const recordings = await recordStepOutcomes(handle.db, outcomes(here));
    assert.deepEqual(recordings, [
      { kind: 'continued', added: [{ seq: 4, name: 'merge', resource: 'tool:y', priority: 2 }] },
      { kind: 'continued', added: [] },
    ]);
    await appliedOneByOne(outcomes(twin), branchCompletedByThePass);
    const mine = await written(here);
    assert.deepEqual(mine, await written(twin));
    assert.deepEqual(
      mine.events.slice(-2).map((event) => event.data),
      [{ branch: 0, join: 'merge' }, { branch: 1 }],
    );
  });

  it('leaves a task’s branch outcomes to the scheduler when one of them cannot apply', async () => {
    const taskId = await fannedOutTask(2);
    assert.deepEqual(await kinds([at(taskId, 2, done('a')), at(taskId, 3, failed)]), [
      'recorded',
      'recorded',
    ]);
    assert.equal((await stepRow(taskId, 2))?.outcomeAppliedAt, null);
    assert.equal(await stepRow(taskId, 4), undefined);
  });

  it('sees a sibling branch that finished while it waited for the task, and adds the join once', async () => {
    const taskId = await fannedOutTask(2);
    let finishSibling!: () => void;
    const siblingMayCommit = new Promise<void>((resolve) => (finishSibling = resolve));
    let siblingWrote!: () => void;
    const siblingHoldsTheTask = new Promise<void>((resolve) => (siblingWrote = resolve));
    // Another executor's write of the other branch holds the task until told to commit.
    const sibling = handle.db.transaction(async (tx) => {
      const recorded = await recordStepOutcomesIn(tx, [at(taskId, 2, done('a'))]);
      siblingWrote();
      await siblingMayCommit;
      return recorded;
    });
    await siblingHoldsTheTask;
    const mine = recordStepOutcomes(handle.db, [at(taskId, 3, done('b'))]);
    await waitFor(async () => (await waitingForLocks()) > 0);
    finishSibling();

    assert.deepEqual(await sibling, [{ kind: 'continued', added: [] }]);
    assert.deepEqual(await mine, [
      { kind: 'continued', added: [{ seq: 4, name: 'merge', resource: 'tool:y', priority: 2 }] },
    ]);
    const joins = await handle.db
      .select()
      .from(taskSteps)
      .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.joinOf, 1)));
    assert.equal(joins.length, 1);
    assert.deepEqual(joins[0]?.input, { outputs: ['a', 'b'] });
  });
});

/** Sessions of this database waiting for a lock. */
async function waitingForLocks(): Promise<number> {
  const rows = await handle.db.execute<{ n: number }>(sql`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock'`);
  return Number(rows[0]?.n ?? 0);
}

/** Resolves once `condition` holds, asking again every few milliseconds (at most 10 s). */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('the condition did not hold within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

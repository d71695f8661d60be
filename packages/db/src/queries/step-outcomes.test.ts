/**
 * Recording step outcomes against the real Postgres: one statement for many steps (the executor's
 * group commit), each with its event in its task's sequence, stale dispatches left alone.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { and, eq } from 'drizzle-orm';
import type { StepOutcome } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { taskSteps } from '../schema.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { appendTaskEvent } from './events.js';
import { recordStepOutcome, recordStepOutcomes, type StepDispatchRef } from './steps.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, listTaskEvents } from './tasks.js';

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
    const recorded = await recordStepOutcomes(handle.db, [
      { ref: ref(fanned, 2), outcome: done('b') },
      { ref: ref(single, 1), outcome: failed },
      { ref: ref(fanned, 1), outcome: done('a') },
      { ref: ref(fanned, 3), outcome: { type: 'cancelled' } },
    ]);
    assert.deepEqual(recorded, [true, true, true, true]);

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
    const recorded = await recordStepOutcomes(handle.db, [
      { ref: { taskId, seq: 1, dispatch: 1 }, outcome: done('again') }, // recorded already
      { ref: { taskId, seq: 2, dispatch: 2 }, outcome: done('other') }, // another dispatch's
      { ref: { taskId, seq: 2, dispatch: 1 }, outcome: done('second') },
    ]);
    assert.deepEqual(recorded, [false, false, true]);
    assert.deepEqual((await stepRow(taskId, 1))?.outcome, done('first'));
    assert.deepEqual((await stepRow(taskId, 2))?.outcome, done('second'));
    const types = (await listTaskEvents(handle.db, taskId, 0)).map((e) => `${e.seq}:${e.type}`);
    assert.deepEqual(types, ['1:create', '2:step_succeeded', '3:step_succeeded']);
    assert.deepEqual(await recordStepOutcomes(handle.db, []), []);
  });
});

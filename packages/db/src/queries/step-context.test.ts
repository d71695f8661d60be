/**
 * The step context's queries against the real Postgres: which outputs a step sees (loops, fan-out
 * branches), the latest approval, and progress writes with their events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import type { Json, StepOutcome } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { taskSteps, tasks } from '../schema.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { appendTaskEvent } from './events.js';
import { latestApproval, outputsBefore, recordStepProgress } from './step-context.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, listTaskEvents } from './tasks.js';

const manifest: TaskTypeManifest = {
  name: 'context-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'plan',
  steps: ['plan', 'parse', 'store', 'join'].map((name) => ({
    name,
    resource: 'llm',
    timeoutMs: 1_000,
    maxAttempts: 1,
  })),
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

async function newTask(): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  return task.id;
}

interface StepRow {
  seq: number;
  name: string;
  status: 'succeeded' | 'failed' | 'running' | 'ready';
  output?: Json;
  fanOutOf?: number;
  branchIndex?: number;
}

/** Writes step rows as the scheduler and executors would have left them (seq 1 exists already). */
async function steps(taskId: string, rows: StepRow[]): Promise<void> {
  for (const row of rows) {
    const outcome: StepOutcome | null =
      row.status === 'succeeded' ? { type: 'complete', output: row.output ?? null } : null;
    const values = {
      name: row.name,
      status: row.status,
      outcome,
      fanOutOf: row.fanOutOf ?? null,
      branchIndex: row.branchIndex ?? null,
    };
    if (row.seq === 1) {
      await handle.db.update(taskSteps).set(values).where(eq(taskSteps.taskId, taskId));
    } else {
      await handle.db.insert(taskSteps).values({
        ...values,
        taskId,
        seq: row.seq,
        resource: 'llm',
        tenantId: 'acme',
        priority: 2,
        input: {},
      });
    }
  }
}

describe('outputsBefore', () => {
  it('shows the latest succeeded output of each step before this one', async () => {
    const taskId = await newTask();
    await steps(taskId, [
      { seq: 1, name: 'plan', status: 'succeeded', output: { turn: 1 } },
      { seq: 2, name: 'parse', status: 'succeeded', output: 'first' },
      { seq: 3, name: 'plan', status: 'succeeded', output: { turn: 2 } },
      { seq: 4, name: 'parse', status: 'failed' },
      { seq: 5, name: 'store', status: 'running' },
      { seq: 6, name: 'join', status: 'ready' },
    ]);
    const outputs = await outputsBefore(handle.db, taskId, 5);
    assert.deepEqual(outputs, { plan: { turn: 2 }, parse: 'first' });
    assert.deepEqual(await outputsBefore(handle.db, taskId, 2), { plan: { turn: 1 } });
  });

  it('keeps fan-out branches apart: a branch sees its own steps, the join none of them', async () => {
    const taskId = await newTask();
    await steps(taskId, [
      { seq: 1, name: 'plan', status: 'succeeded', output: 'plan' },
      {
        seq: 2,
        name: 'parse',
        status: 'succeeded',
        output: 'parse A',
        fanOutOf: 1,
        branchIndex: 0,
      },
      {
        seq: 3,
        name: 'parse',
        status: 'succeeded',
        output: 'parse B',
        fanOutOf: 1,
        branchIndex: 1,
      },
      {
        seq: 4,
        name: 'store',
        status: 'succeeded',
        output: 'store B',
        fanOutOf: 1,
        branchIndex: 1,
      },
      { seq: 5, name: 'store', status: 'running', fanOutOf: 1, branchIndex: 0 },
      { seq: 6, name: 'join', status: 'running' },
    ]);
    assert.deepEqual(
      await outputsBefore(handle.db, taskId, 5),
      { plan: 'plan', parse: 'parse A' },
      'branch 0 sees its own parse, not branch 1’s later one',
    );
    assert.deepEqual(
      await outputsBefore(handle.db, taskId, 6),
      { plan: 'plan' },
      'the join sees the branches only through its input',
    );
  });

  it('is empty for the first step', async () => {
    const taskId = await newTask();
    assert.deepEqual(await outputsBefore(handle.db, taskId, 1), {});
  });
});

describe('latestApproval', () => {
  it('reads the comment of the latest approve event', async () => {
    const taskId = await newTask();
    assert.equal(await latestApproval(handle.db, taskId), undefined);
    await appendTaskEvent(handle.db, { taskId, type: 'approve', data: { comment: 'first' } });
    await appendTaskEvent(handle.db, { taskId, type: 'step_started', data: { comment: 'no' } });
    await appendTaskEvent(handle.db, { taskId, type: 'approve', data: { comment: 'second' } });
    const approval = await latestApproval(handle.db, taskId);
    assert.equal(approval?.comment, 'second');
    assert.equal(approval?.seq, 4);
    assert.ok(approval?.decidedAt instanceof Date);
  });

  it('has an empty comment when the approver wrote none', async () => {
    const taskId = await newTask();
    await appendTaskEvent(handle.db, { taskId, type: 'approve' });
    assert.equal((await latestApproval(handle.db, taskId))?.comment, '');
  });
});

describe('recordStepProgress', () => {
  it('stores the progress on a running task with a step_progress event', async () => {
    const taskId = await newTask();
    const progress = { taskId, step: 'plan', seq: 1, fraction: 0.25, message: 'a quarter' };
    assert.equal(await recordStepProgress(handle.db, progress), false, 'not while queued');
    await handle.db.update(tasks).set({ status: 'running' }).where(eq(tasks.id, taskId));
    assert.equal(await recordStepProgress(handle.db, progress), true);
    const [task] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
    assert.equal(task?.progress, 0.25);
    assert.equal(task?.progressMessage, 'a quarter');
    const events = await listTaskEvents(handle.db, taskId, 0);
    const last = events.at(-1);
    assert.equal(last?.type, 'step_progress');
    assert.equal(last?.step, 'plan');
    assert.deepEqual(last?.data, { seq: 1, progress: 0.25, message: 'a quarter' });
    assert.equal(events.filter((e) => e.type === 'step_progress').length, 1);
  });
});

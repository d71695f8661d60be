/**
 * The batched transition of locked tasks against the real Postgres: every request writes what
 * `applyTransition` writes for the same request (twin tasks, rows and events compared), refusals
 * change nothing, and a row that moved on after its lock is decided again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eq } from 'drizzle-orm';
import type { TaskStatus } from '@sluice/core';
import type { DatabaseHandle } from './client.js';
import { tasks } from './schema.js';
import { eventsAsWritten, openTaskTypeDatabase, type TaskTypeDatabase } from './testing/index.js';
import { applyLockedTransitions, applyTransition, type TransitionRequest } from './transition.js';
import type { TaskTypeManifest } from './queries/task-types.js';
import { createTask, lockTasks, type TaskRecord } from './queries/tasks.js';

const manifest: TaskTypeManifest = {
  name: 'locked-transitions-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'tool:x', timeoutMs: 1_000, maxAttempts: 1 }],
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

/** A new task put in `status` (with progress reported, to see it reset), as earlier work left it. */
async function taskIn(status: TaskStatus): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  await handle.db
    .update(tasks)
    .set({
      status,
      currentStep: 'work',
      progress: 0.5,
      progressMessage: 'half',
      output: { earlier: true },
      error: { errorClass: 'external_5xx', message: 'earlier', retryable: true },
    })
    .where(eq(tasks.id, task.id));
  return task.id;
}

/** What a transition wrote, without what differs between two tasks by nature. */
async function written(taskId: string) {
  const [row] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
  assert.ok(row);
  const { id: _id, createdAt: _c, updatedAt, startedAt, finishedAt, traceId: _t, ...rest } = row;
  const { traceParent: _p, ...columns } = rest;
  return {
    columns,
    updatedAt: updatedAt.getTime() > 0,
    startedAt: startedAt !== null,
    finishedAt: finishedAt !== null,
    events: await eventsAsWritten(handle.db, taskId),
  };
}

type Request = Omit<TransitionRequest, 'taskId' | 'locked'>;

/** The same request on twin tasks: alone through applyTransition, and batched with the others. */
const cases: Array<{ from: TaskStatus; request: Request }> = [
  {
    from: 'queued',
    request: {
      event: { type: 'start' },
      step: 'work',
      patch: { currentStep: 'work' },
      data: { seq: 1, attempt: 1 },
    },
  },
  {
    from: 'running',
    request: {
      event: { type: 'complete' },
      step: 'work',
      patch: { currentStep: null, output: { answer: 42 }, error: null },
    },
  },
  {
    from: 'running',
    request: {
      event: { type: 'fail_retryable' },
      step: 'work',
      patch: { error: { errorClass: 'external_5xx', message: '503', retryable: true } },
      data: { error_class: 'external_5xx', next_attempt_at: '2026-11-30T00:00:00.000Z' },
    },
  },
  {
    from: 'running',
    request: {
      event: { type: 'await_approval' },
      step: 'work',
      patch: {
        approval: {
          prompt: 'ok?',
          step: 'work',
          timeoutMs: 1_000,
          onTimeout: 'cancel',
          deadline: '2026-11-30T00:00:00.000Z',
          then: { type: 'next', step: 'work', input: {} },
          originSeq: 1,
        },
      },
      data: { prompt: 'ok?' },
    },
  },
  { from: 'failed_terminal', request: { event: { type: 'retry' }, data: { comment: 'again' } } },
  { from: 'queued', request: { event: { type: 'cancel' }, data: { reason: 'not needed' } } },
];

async function lockedRequests(
  taskIds: readonly string[],
  requestOf: (index: number) => Request,
  tx: Parameters<Parameters<DatabaseHandle['db']['transaction']>[0]>[0],
): Promise<TransitionRequest[]> {
  const locked = await lockTasks(tx, taskIds);
  return taskIds.map((taskId, index) => ({
    ...requestOf(index),
    taskId,
    locked: locked.get(taskId) as TaskRecord,
  }));
}

describe('applyLockedTransitions', () => {
  it('writes what applyTransition writes, for many tasks in one statement', async () => {
    const alone: string[] = [];
    const batched: string[] = [];
    for (const { from, request } of cases) {
      const single = await taskIn(from);
      const result = await applyTransition(handle.db, { ...request, taskId: single });
      assert.ok(result.ok, `${request.event.type} from ${from}: ${JSON.stringify(result)}`);
      alone.push(single);
      batched.push(await taskIn(from));
    }
    const results = await handle.db.transaction(async (tx) =>
      applyLockedTransitions(
        tx,
        await lockedRequests(
          batched,
          (index) => (cases[index] as { request: Request }).request,
          tx,
        ),
      ),
    );
    for (const [index, { from, request }] of cases.entries()) {
      const result = results[index];
      assert.ok(result?.ok, `${request.event.type} from ${from}`);
      assert.equal(result.taskId, batched[index]);
      assert.equal(result.from.status, from);
      assert.deepEqual(
        await written(batched[index] as string),
        await written(alone[index] as string),
        `${request.event.type} from ${from}`,
      );
      assert.equal(result.seq, (await written(batched[index] as string)).events.at(-1)?.seq);
    }
  });

  it('refuses what the table does not allow, changing nothing, and applies the rest', async () => {
    const queued = await taskIn('queued');
    const running = await taskIn('running');
    const before = await written(queued);
    const complete: Request = { event: { type: 'complete' }, patch: { output: 1 } };
    const [refused, applied] = await handle.db.transaction(async (tx) =>
      applyLockedTransitions(tx, await lockedRequests([queued, running], () => complete, tx)),
    );
    assert.equal(refused?.ok, false);
    assert.equal(refused.ok ? '' : refused.code, 'refused');
    assert.deepEqual(await written(queued), before);
    assert.equal(applied?.ok, true);
  });

  it('decides again on the row as it is when it changed after the lock was read', async () => {
    const taskId = await taskIn('running');
    const result = await handle.db.transaction(async (tx) => {
      const [request] = await lockedRequests([taskId], () => ({ event: { type: 'complete' } }), tx);
      // Changed by this same transaction after the read: the version the request saw is gone.
      await tx.update(tasks).set({ status: 'queued', version: 99 }).where(eq(tasks.id, taskId));
      return applyLockedTransitions(tx, [request as TransitionRequest]);
    });
    assert.equal(result[0]?.ok, false, 'a queued task cannot complete');
    assert.equal((await written(taskId)).columns.status, 'queued');
  });

  it('refuses two transitions of one task and requests without a lock', async () => {
    const taskId = await taskIn('running');
    await handle.db.transaction(async (tx) => {
      const [request] = await lockedRequests([taskId], () => ({ event: { type: 'complete' } }), tx);
      await assert.rejects(
        applyLockedTransitions(tx, [request as TransitionRequest, request as TransitionRequest]),
        /two transitions/,
      );
    });
    await assert.rejects(
      applyLockedTransitions(handle.db, [{ taskId, event: { type: 'complete' } }]),
      /without its lock/,
    );
  });
});

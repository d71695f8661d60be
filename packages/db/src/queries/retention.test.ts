/**
 * Retention against the real Postgres: which finished tasks go (with every row that references
 * them) and which stay, the tombstones of their idempotency keys and what a late duplicate gets,
 * tombstone expiry, and that retention neither waits for nor races the hot path.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SluiceError, type Json } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import {
  markTaskFinished,
  oneStepManifest,
  openTaskTypeDatabase,
  waitForLockWaiter,
  type TaskTypeDatabase,
} from '../testing/index.js';
import { insertDeadLetter, markDeadLetterRedriven, purgeDeadLetters } from './dead-letters.js';
import {
  deleteExpiredTombstones,
  deleteFinishedTasks,
  findLiveTombstone,
  type DeleteFinishedTasksOptions,
} from './retention.js';
import { createTask, findTask, submitTask, type NewTask, type TaskRecord } from './tasks.js';
import { TimerKind, addTimer } from './timers.js';

const manifest = oneStepManifest({ maxAttempts: 3 });

const DAY_MS = 24 * 60 * 60 * 1_000;

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

// A database per test: retention deletes whatever is old enough, whichever test made it.
beforeEach(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme', 'globex'],
    manifests: [manifest],
    max: 6,
  });
  handle = fixture.handle;
});

afterEach(async () => {
  await fixture?.close();
});

function request(extra: Partial<NewTask> = {}): NewTask {
  return { tenantId: 'acme', taskType: manifest, priority: 2, input: { n: 1 }, ...extra };
}

/** A task that reached `status` `ageMs` ago, its events published (the relay saw them). */
async function finishedTask(
  ageMs: number,
  extra: Partial<NewTask> & { status?: string } = {},
): Promise<TaskRecord> {
  const { task } = await createTask(handle.db, request(extra));
  await markTaskFinished(handle.sql, task.id, new Date(Date.now() - ageMs), extra.status);
  return task;
}

async function rowsOf(taskId: string): Promise<Record<string, number>> {
  const [row] = await handle.sql<{ [table: string]: number }[]>`
    select
      (select count(*)::int from tasks where id = ${taskId}) as tasks,
      (select count(*)::int from task_steps where task_id = ${taskId}) as steps,
      (select count(*)::int from task_events where task_id = ${taskId}) as events,
      (select count(*)::int from task_timers where task_id = ${taskId}) as timers,
      (select count(*)::int from dead_letters where task_id = ${taskId}) as dead_letters`;
  assert.ok(row);
  return { ...row };
}

const GONE = { tasks: 0, steps: 0, events: 0, timers: 0, dead_letters: 0 };

function olderThan(ageMs: number, limit = 500): DeleteFinishedTasksOptions {
  return { finishedBefore: new Date(Date.now() - ageMs), tombstoneTtlMs: 30 * DAY_MS, limit };
}

async function deadLetterOf(task: TaskRecord): Promise<string> {
  return insertDeadLetter(handle.db, {
    taskId: task.id,
    tenantId: task.tenantId,
    step: 'only',
    stepSeq: 1,
    reason: 'attempts_exhausted',
    error: { errorClass: 'external_5xx', message: 'HTTP 500', retryable: true },
    attempts: 3,
  });
}

describe('deleteFinishedTasks', () => {
  it('deletes old final tasks with their steps, events, timers and redriven dead letters', async () => {
    const succeeded = await finishedTask(8 * DAY_MS);
    const failed = await finishedTask(9 * DAY_MS, { status: 'failed_terminal' });
    const cancelled = await finishedTask(10 * DAY_MS, { status: 'cancelled' });
    await addTimer(handle.db, {
      taskId: cancelled.id,
      kind: TimerKind.ApprovalTimeout,
      dueAt: new Date(Date.now() - 10 * DAY_MS),
    });
    const redriven = await deadLetterOf(failed);
    await handle.db.transaction((tx) => markDeadLetterRedriven(tx, redriven));
    assert.deepEqual(await rowsOf(cancelled.id), {
      ...GONE,
      tasks: 1,
      steps: 1,
      events: 1,
      timers: 1,
    });

    const deleted = await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS));

    assert.deepEqual(deleted, {
      tasks: 3,
      steps: 3,
      events: 3,
      timers: 1,
      deadLetters: 1,
      tombstones: 0,
    });
    for (const task of [succeeded, failed, cancelled]) {
      assert.deepEqual(await rowsOf(task.id), GONE);
      assert.equal(await findTask(handle.db, 'acme', task.id), undefined);
    }
  });

  it('keeps recent, unfinished, dead-lettered and unrelayed tasks', async () => {
    const recent = await finishedTask(1 * DAY_MS);
    const { task: queued } = await createTask(handle.db, request());
    await handle.sql`update tasks set created_at = now() - interval '30 days' where id = ${queued.id}`;
    const oldRunning = await finishedTask(30 * DAY_MS, { status: 'running' });
    const deadLettered = await finishedTask(30 * DAY_MS, { status: 'failed_terminal' });
    const letter = await deadLetterOf(deadLettered);
    const unrelayed = await finishedTask(30 * DAY_MS);
    await handle.sql`insert into task_event_outbox (event_id)
      select id from task_events where task_id = ${unrelayed.id}`;

    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS))).tasks, 0);
    for (const task of [recent, queued, oldRunning, deadLettered, unrelayed]) {
      assert.equal((await rowsOf(task.id)).tasks, 1, `task ${task.id} was kept`);
    }

    // Purging the letter (or relaying the events) releases the task.
    await purgeDeadLetters(handle.db, [letter]);
    await handle.sql`delete from task_event_outbox
      where event_id in (select id from task_events where task_id = ${unrelayed.id})`;
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS))).tasks, 2);
    assert.deepEqual(await rowsOf(deadLettered.id), GONE);
    assert.deepEqual(await rowsOf(unrelayed.id), GONE);
    assert.equal((await rowsOf(recent.id)).tasks, 1);
  });

  it('deletes at most `limit` tasks per batch, oldest first', async () => {
    const ages = [20, 19, 18, 17, 16].map((days) => days * DAY_MS);
    const tasks = [];
    for (const age of ages) tasks.push(await finishedTask(age));
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS, 2))).tasks, 2);
    const left = await Promise.all(tasks.map(async (t) => (await rowsOf(t.id)).tasks));
    assert.deepEqual(left, [0, 0, 1, 1, 1]);
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS, 2))).tasks, 2);
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS, 2))).tasks, 1);
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS, 2))).tasks, 0);
  });

  it('skips a task another transaction holds instead of waiting for it', async () => {
    const held = await finishedTask(10 * DAY_MS);
    const free = await finishedTask(9 * DAY_MS);
    await handle.sql.begin(async (tx) => {
      await tx`select 1 from tasks where id = ${held.id} for update`;
      const deleted = await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS));
      assert.equal(deleted.tasks, 1);
    });
    assert.equal((await rowsOf(held.id)).tasks, 1);
    assert.deepEqual(await rowsOf(free.id), GONE);
  });
});

describe('idempotency tombstones', () => {
  it('a late duplicate gets the deleted original, and creates nothing', async () => {
    const original = await finishedTask(10 * DAY_MS, { idempotencyKey: 'k-1', input: { n: 7 } });
    await finishedTask(10 * DAY_MS, { idempotencyKey: 'k-1', tenantId: 'globex' });
    const deleted = await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS));
    assert.equal(deleted.tombstones, 2);

    const repeat = await submitTask(handle.db, request({ idempotencyKey: 'k-1', input: { n: 7 } }));
    assert.equal(repeat.kind, 'deleted');
    assert.ok(repeat.kind === 'deleted');
    assert.equal(repeat.tombstone.taskId, original.id);
    assert.equal(repeat.tombstone.status, 'succeeded');
    assert.equal(repeat.tombstone.typeVersion, 1);
    const [count] = await handle.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
    assert.equal(count?.n, 0, 'no second task');

    // A different request under the same key is the conflict any repeat gets.
    await assert.rejects(
      submitTask(handle.db, request({ idempotencyKey: 'k-1', input: { n: 8 } })),
      (error: unknown) =>
        error instanceof SluiceError &&
        error.code === 'already_exists' &&
        error.message.includes(original.id),
    );
    await assert.rejects(
      submitTask(handle.db, request({ idempotencyKey: 'k-1', input: { n: 7 }, priority: 0 })),
      (error: unknown) => error instanceof SluiceError && error.code === 'already_exists',
    );
    // createTask has no task to return for it: already_exists, naming the original.
    await assert.rejects(
      createTask(handle.db, request({ idempotencyKey: 'k-1', input: { n: 7 } })),
      (error: unknown) =>
        error instanceof SluiceError &&
        error.code === 'already_exists' &&
        error.message.includes(original.id),
    );
    // Another key, or no key, is unaffected.
    assert.equal((await submitTask(handle.db, request({ idempotencyKey: 'k-2' }))).kind, 'created');
    assert.equal((await submitTask(handle.db, request())).kind, 'created');
  });

  it('expired tombstones are deleted in batches, and free their key', async () => {
    for (const key of ['a', 'b', 'c']) {
      await finishedTask(10 * DAY_MS, { idempotencyKey: key, input: { key } as Json });
    }
    await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS));
    assert.equal(await deleteExpiredTombstones(handle.db, 10), 0, 'none expired yet');
    await handle.sql`update idempotency_tombstones set expires_at = now() - interval '1 second'
      where idempotency_key in ('a', 'b')`;
    assert.equal(await findLiveTombstone(handle.db, 'acme', 'a'), undefined);
    assert.ok(await findLiveTombstone(handle.db, 'acme', 'c'));

    // An expired tombstone no longer answers, even before it is deleted.
    const reused = await submitTask(handle.db, request({ idempotencyKey: 'a', input: { x: 1 } }));
    assert.equal(reused.kind, 'created');

    assert.equal(await deleteExpiredTombstones(handle.db, 1), 1);
    assert.equal(await deleteExpiredTombstones(handle.db, 1), 1);
    assert.equal(await deleteExpiredTombstones(handle.db, 1), 0);
    const keys = await handle.sql<{ key: string }[]>`
      select idempotency_key as key from idempotency_tombstones`;
    assert.deepEqual(
      keys.map((r) => r.key),
      ['c'],
    );
  });

  it('a key reused after its tombstone expired gets a fresh tombstone when deleted again', async () => {
    await finishedTask(20 * DAY_MS, { idempotencyKey: 'again', input: { v: 1 } });
    await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS));
    await handle.sql`update idempotency_tombstones set expires_at = now() - interval '1 second'`;
    const second = await finishedTask(10 * DAY_MS, { idempotencyKey: 'again', input: { v: 2 } });
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS))).tombstones, 1);
    const tombstone = await findLiveTombstone(handle.db, 'acme', 'again');
    assert.equal(tombstone?.taskId, second.id);
  });

  it('a create that races the deletion of the key holder waits for it, then finds the tombstone', async () => {
    const original = await finishedTask(10 * DAY_MS, { idempotencyKey: 'race' });
    let racing: Promise<Awaited<ReturnType<typeof submitTask>>> | undefined;
    await handle.db.transaction(async (tx) => {
      assert.equal((await deleteFinishedTasks(tx, olderThan(7 * DAY_MS))).tasks, 1);
      // The key is free in the index only once this transaction commits: the insert must wait.
      racing = submitTask(handle.db, request({ idempotencyKey: 'race' }));
      await waitForLockWaiter(handle.sql);
    });
    assert.ok(racing);
    const result = await racing;
    assert.equal(result.kind, 'deleted');
    assert.ok(result.kind === 'deleted');
    assert.equal(result.tombstone.taskId, original.id);
    const [count] = await handle.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
    assert.equal(count?.n, 0, 'no second task');
  });
});

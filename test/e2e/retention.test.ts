/**
 * Retention end to end (issue 4, Retention): tasks that finished long ago (their `finished_at` set
 * back in SQL) are deleted by the scheduler's retention loop with their steps and events; GetTask
 * and WatchTask answer NOT_FOUND; a late CreateTask with the same idempotency key gets the original
 * task id and creates nothing (a different input under it gets ALREADY_EXISTS); a task with an
 * unpurged dead letter stays until the letter is purged; an expired tombstone frees its key.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { TaskEvent } from '@sluice/api';
import { createApiKey } from '@sluice/db';
import { createAdminClient, isServiceError, type AdminClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'retention-task-types.ts',
);

let e2e: E2eStack;
let admin: AdminClient;

before(async () => {
  e2e = await startE2eStack({
    label: 'retention',
    maxConnections: 4,
    resources: ['llm'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_WATCH_RECHECK_MS: '500',
      // Nothing finished in this test is an hour old until the test says so.
      SLUICE_RETENTION_AGE: '1h',
      SLUICE_TOMBSTONE_TTL: '1d',
      SLUICE_RETENTION_BATCH: '2',
      SLUICE_RETENTION_INTERVAL_MS: '200',
    },
  });
  const adminKey = await createApiKey(e2e.handle.db, { tenantId: e2e.tenantId, isAdmin: true });
  admin = createAdminClient({ address: e2e.stack.grpcAddress, apiKey: adminKey });
});

after(async () => {
  admin?.close();
  const exits = await e2e?.stop();
  if (exits) {
    assert.deepEqual(
      Object.values(exits),
      Object.values(exits).map(() => 0),
      'every service stops cleanly',
    );
  }
});

/** Creates a task and waits until it is final; returns its id and final status. */
async function runToEnd(type: string, n: number, idempotencyKey: string) {
  const { task, created } = await e2e.client.createTask({
    type,
    priority: 'PRIORITY_P2',
    input: { n },
    idempotencyKey,
  });
  assert.equal(created, true);
  const events: TaskEvent[] = [];
  for await (const event of e2e.client.watchTask(task.task_id, 0, AbortSignal.timeout(60_000)))
    events.push(event);
  return { id: task.task_id, status: events.at(-1)?.to_status };
}

/** Sets back the finish time of tasks, so they count as finished two days ago. */
async function finishedLongAgo(ids: readonly string[]): Promise<void> {
  await e2e.handle.sql`
    update tasks set finished_at = now() - interval '2 days' where id = any(${ids}::uuid[])`;
}

async function rowCounts(ids: readonly string[]) {
  const [row] = await e2e.handle.sql<{ tasks: number; steps: number; events: number }[]>`
    select
      (select count(*)::int from tasks where id = any(${ids}::uuid[])) as tasks,
      (select count(*)::int from task_steps where task_id = any(${ids}::uuid[])) as steps,
      (select count(*)::int from task_events where task_id = any(${ids}::uuid[])) as events`;
  assert.ok(row);
  return { ...row };
}

async function taskCount(): Promise<number> {
  const [row] = await e2e.handle.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
  return row?.n ?? -1;
}

/** Polls `probe` until it returns true; fails after the deadline. */
async function eventually(probe: () => Promise<boolean>, what: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function isGrpcCode(code: grpcStatus) {
  return (error: unknown) => isServiceError(error) && error.code === code;
}

describe('retention', () => {
  it('deletes old finished tasks, keeps their keys as tombstones and dead-lettered tasks until purged', async () => {
    const old = [
      await runToEnd('rt-quick', 1, 'old-1'),
      await runToEnd('rt-quick', 2, 'old-2'),
      await runToEnd('rt-quick', 3, 'old-3'),
    ];
    for (const task of old) assert.equal(task.status, 'TASK_STATUS_SUCCEEDED');
    const doomed = await runToEnd('rt-doomed', 4, 'doomed');
    assert.equal(doomed.status, 'TASK_STATUS_FAILED_TERMINAL');
    const recent = await runToEnd('rt-quick', 5, 'recent');
    const oldIds = old.map((t) => t.id);

    await finishedLongAgo([...oldIds, doomed.id]);
    // Three tasks at two a batch: retention goes on while its batches are full.
    await eventually(async () => (await rowCounts(oldIds)).tasks === 0, 'the old tasks to go');
    assert.deepEqual(await rowCounts(oldIds), { tasks: 0, steps: 0, events: 0 });

    for (const task of old) {
      await assert.rejects(e2e.client.getTask(task.id), isGrpcCode(grpcStatus.NOT_FOUND));
      await assert.rejects(async () => {
        for await (const event of e2e.client.watchTask(task.id, 0, AbortSignal.timeout(10_000)))
          assert.fail(`no event of a deleted task, got ${event.type}`);
      }, isGrpcCode(grpcStatus.NOT_FOUND));
    }

    // A late duplicate: the original's id, flagged as not created, and no new task.
    const before = await taskCount();
    const late = await e2e.client.createTask({
      type: 'rt-quick',
      priority: 'PRIORITY_P2',
      input: { n: 1 },
      idempotencyKey: 'old-1',
    });
    assert.equal(late.created, false);
    assert.equal(late.task.task_id, old[0]?.id);
    assert.equal(late.task.status, 'TASK_STATUS_SUCCEEDED');
    assert.equal(late.task.idempotency_key, 'old-1');
    assert.equal(late.task.type, 'rt-quick');
    assert.equal(await taskCount(), before, 'the late duplicate created nothing');
    await assert.rejects(
      e2e.client.createTask({
        type: 'rt-quick',
        priority: 'PRIORITY_P2',
        input: { n: 99 },
        idempotencyKey: 'old-1',
      }),
      (error: unknown) =>
        isGrpcCode(grpcStatus.ALREADY_EXISTS)(error) &&
        isServiceError(error) &&
        error.details.includes(old[0]?.id ?? '?'),
    );
    assert.equal(await taskCount(), before);

    // The dead-lettered task and the recent one are still there.
    assert.equal((await e2e.client.getTask(doomed.id)).task.status, 'TASK_STATUS_FAILED_TERMINAL');
    assert.equal((await e2e.client.getTask(recent.id)).task.status, 'TASK_STATUS_SUCCEEDED');

    // Purging its letter releases the dead-lettered task.
    const letters = await e2e.handle.sql<{ id: string }[]>`
      select id from dead_letters where task_id = ${doomed.id}`;
    assert.equal(letters.length, 1);
    await admin.purgeDeadLetters(letters.map((l) => l.id));
    await eventually(
      async () => (await rowCounts([doomed.id])).tasks === 0,
      'the purged task to go',
    );
    await assert.rejects(e2e.client.getTask(doomed.id), isGrpcCode(grpcStatus.NOT_FOUND));
    assert.equal((await e2e.client.getTask(recent.id)).task.status, 'TASK_STATUS_SUCCEEDED');

    // Once its window has passed, the tombstone is deleted and the key is free again.
    await e2e.handle.sql`
      update idempotency_tombstones set expires_at = now() - interval '1 second'
      where idempotency_key = 'old-2'`;
    await eventually(async () => {
      const rows = await e2e.handle.sql`
        select 1 from idempotency_tombstones where idempotency_key = 'old-2'`;
      return rows.length === 0;
    }, 'the expired tombstone to go');
    const reused = await e2e.client.createTask({
      type: 'rt-quick',
      priority: 'PRIORITY_P2',
      input: { n: 2 },
      idempotencyKey: 'old-2',
    });
    assert.equal(reused.created, true);
    assert.notEqual(reused.task.task_id, old[1]?.id);
  });
});

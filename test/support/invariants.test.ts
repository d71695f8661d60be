/**
 * The invariant check itself must be able to fail: each test breaks one invariant in a fresh
 * database (by writing rows no service would write) and expects the check to name it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  appendTaskEvent,
  applyTransition,
  createTask,
  createTenant,
  insertDeadLetter,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { assertDatabaseInvariants, findInvariantProblems } from './invariants.js';

const manifest: TaskTypeManifest = {
  name: 'invariants-test',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'work',
  steps: [{ name: 'work', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('database invariant check', () => {
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let tenant = 0;

  before(async () => {
    database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
    handle = openDatabase(database.url, { max: 2 });
    await registerTaskType(handle.db, manifest);
  });
  after(async () => {
    await handle.close();
    await database.drop();
  });

  /** A tenant of its own per test (the check is scoped by tenant) with one queued task. */
  async function queuedTask(): Promise<{ tenantId: string; taskId: string }> {
    tenant += 1;
    const tenantId = `t${tenant}`;
    await createTenant(handle.db, { id: tenantId });
    const { task } = await createTask(handle.db, {
      tenantId,
      taskType: manifest,
      priority: 2,
      input: {},
    });
    return { tenantId, taskId: task.id };
  }

  /** Moves the task to running through the table, as an executor starting step 1 does. */
  async function start(taskId: string): Promise<void> {
    await handle.db.transaction(async (tx) => {
      const started = await applyTransition(tx, {
        taskId,
        event: { type: 'start' },
        step: 'work',
        data: { seq: 1, attempt: 1 },
      });
      assert.ok(started.ok);
    });
  }

  it('passes a queued task with its step ready, and names it when every task must be final', async () => {
    const { tenantId, taskId } = await queuedTask();
    const summary = await assertDatabaseInvariants(handle, { tenantId });
    assert.deepEqual(summary, { tasks: 1, byStatus: { queued: 1 }, deadLetters: 0 });
    await assert.rejects(
      assertDatabaseInvariants(handle, { tenantId, requireFinal: true }),
      new RegExp(`task ${taskId}: queued, not final`),
    );
  });

  it('names a task that waits with nothing queued, in flight or timed', async () => {
    const { tenantId, taskId } = await queuedTask();
    await handle.sql`update task_steps set status = 'succeeded' where task_id = ${taskId}`;
    const problems = await findInvariantProblems(handle, { tenantId });
    assert.deepEqual(problems, [
      `task ${taskId}: queued with no step queued or in flight and no timer pending`,
    ]);
  });

  it('names a status its history does not end in', async () => {
    const { tenantId, taskId } = await queuedTask();
    await handle.sql`update tasks set status = 'succeeded' where id = ${taskId}`;
    const problems = await findInvariantProblems(handle, { tenantId });
    assert.deepEqual(problems, [
      `task ${taskId}: status succeeded, but its history ends in queued`,
    ]);
  });

  it('names a history that is not a path in the table', async () => {
    const { tenantId, taskId } = await queuedTask();
    // Completed straight from queued, skipping start: the table has no such edge.
    await handle.sql`update tasks set status = 'succeeded', last_event_seq = 2 where id = ${taskId}`;
    await handle.sql`
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status)
      values (${taskId}, ${tenantId}, 2, 'complete', 'queued', 'succeeded')
    `;
    const problems = await findInvariantProblems(handle, { tenantId });
    assert.equal(problems.length, 1, problems.join('\n'));
    assert.match(
      problems[0] ?? '',
      new RegExp(`task ${taskId}: .*create→queued, complete→succeeded`),
    );
  });

  it('names a gap in the event sequence', async () => {
    const { tenantId, taskId } = await queuedTask();
    await handle.sql`update task_events set seq = 2 where task_id = ${taskId}`;
    await handle.sql`update tasks set last_event_seq = 2 where id = ${taskId}`;
    const problems = await findInvariantProblems(handle, { tenantId });
    assert.ok(
      problems.includes(`task ${taskId}: event 1 has seq 2`),
      `expected the gap among: ${problems.join('\n')}`,
    );
    assert.ok(problems.includes(`task ${taskId}: 1 events, but last_event_seq is 2`));
  });

  it('names a step started again after its success was recorded', async () => {
    const { tenantId, taskId } = await queuedTask();
    await start(taskId);
    const succeeded = await appendTaskEvent(handle.db, {
      taskId,
      type: 'step_succeeded',
      step: 'work',
      data: { seq: 1 },
    });
    assert.deepEqual(await findInvariantProblems(handle, { tenantId }), []);
    const again = await appendTaskEvent(handle.db, {
      taskId,
      type: 'step_started',
      step: 'work',
      data: { seq: 1, attempt: 2 },
    });
    assert.deepEqual(await findInvariantProblems(handle, { tenantId }), [
      `task ${taskId}: step 1 has step_started (event ${again}) after its success (event ${succeeded})`,
    ]);
  });

  it('names a succeeded task that still has a dead letter, and not one that was redriven', async () => {
    const { tenantId, taskId } = await queuedTask();
    await start(taskId);
    await handle.db.transaction(async (tx) => {
      const completed = await applyTransition(tx, {
        taskId,
        event: { type: 'complete' },
        step: 'work',
      });
      assert.ok(completed.ok);
    });
    await handle.sql`update task_steps set status = 'succeeded' where task_id = ${taskId}`;
    assert.deepEqual(await findInvariantProblems(handle, { tenantId }), []);
    const letter = await insertDeadLetter(handle.db, {
      taskId,
      tenantId,
      step: 'work',
      stepSeq: 1,
      reason: 'attempts_exhausted',
      error: { errorClass: 'external_5xx', message: 'boom', retryable: true },
      attempts: 3,
    });
    assert.deepEqual(await findInvariantProblems(handle, { tenantId }), [
      `task ${taskId}: succeeded, yet has 1 dead letter(s)`,
    ]);
    await handle.sql`update dead_letters set redriven_at = now() where id = ${letter}`;
    assert.deepEqual(await findInvariantProblems(handle, { tenantId }), []);
  });
});

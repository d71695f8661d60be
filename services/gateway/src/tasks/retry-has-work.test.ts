/**
 * A RetryTask runs something or is refused: a task the scheduler or an approval failed because what
 * a step asked for could not start (a step its pinned manifest does not declare — possible while an
 * executor's registry and the pinned manifest disagree) runs that step again; a task a retry would
 * leave queued with nothing to run is refused with FAILED_PRECONDITION, and stays as it was.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createTask, type PendingApproval, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'asks',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'draft',
  steps: [{ name: 'draft', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('RetryTask of a task with nothing left to run', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'retry-has-work', manifest });
  });
  after(async () => {
    await server?.close();
  });

  async function newTask(): Promise<string> {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    return task.id;
  }

  async function stepsOf(taskId: string) {
    const rows = await server.handle.sql<{ name: string; status: string }[]>`
      select name, status from task_steps where task_id = ${taskId} and not superseded order by seq`;
    return rows.map((row) => ({ ...row }));
  }

  it("runs the step again whose approval's then could not start", async () => {
    const taskId = await newTask();
    const then = { type: 'next', step: 'publish-added-in-v2', input: {} } as const;
    const approval: PendingApproval = {
      prompt: 'Publish?',
      step: 'draft',
      timeoutMs: 60_000,
      onTimeout: 'cancel',
      deadline: new Date(Date.now() + 60_000).toISOString(),
      then,
      originSeq: 1,
    };
    await server.handle.sql`
      update tasks set status = 'waiting_approval', started_at = now(),
        approval = ${JSON.stringify(approval)}::jsonb
      where id = ${taskId}`;
    const outcome = {
      type: 'awaitApproval',
      output: 1,
      prompt: 'Publish?',
      timeoutMs: 60_000,
      onTimeout: 'cancel',
      then,
    };
    await server.handle.sql`
      update task_steps set status = 'succeeded', attempts = 1, finished_at = now(),
        outcome = ${JSON.stringify(outcome)}::jsonb, outcome_applied_at = now()
      where task_id = ${taskId}`;

    const approved = await server.rpc('ApproveTask', { task_id: taskId, approved: true });
    assert.equal(approved.code, grpc.status.OK);
    const [failed] = await server.handle.sql<{ status: string }[]>`
      select status from tasks where id = ${taskId}`;
    assert.equal(failed?.status, 'failed_terminal');

    const retried = await server.rpc('RetryTask', { task_id: taskId });
    assert.equal(retried.code, grpc.status.OK);
    // The step that asked succeeded, so the retry ran nothing: queued for ever.
    assert.deepEqual(await stepsOf(taskId), [{ name: 'draft', status: 'ready' }]);
  });

  it('is refused with FAILED_PRECONDITION, changing nothing, when it would run nothing', async () => {
    const taskId = await newTask();
    // As such a task was left before: its only step succeeded, no approval to ask again.
    await server.handle.sql`
      update tasks set status = 'failed_terminal', started_at = now(), finished_at = now(),
        error = ${JSON.stringify({ errorClass: 'schema_validation', message: 'no step x', retryable: false })}::jsonb
      where id = ${taskId}`;
    await server.handle.sql`
      update task_steps set status = 'succeeded', attempts = 1, finished_at = now(),
        outcome = ${JSON.stringify({ type: 'next', output: 1, step: 'x', input: {} })}::jsonb,
        outcome_applied_at = now()
      where task_id = ${taskId}`;

    const retried = await server.rpc('RetryTask', { task_id: taskId });
    assert.equal(retried.code, grpc.status.FAILED_PRECONDITION);
    assert.match(retried.details ?? '', /nothing/);
    const [row] = await server.handle.sql<{ status: string; attempt: number }[]>`
      select status, attempt from tasks where id = ${taskId}`;
    assert.deepEqual({ ...row }, { status: 'failed_terminal', attempt: 1 });
  });
});

/**
 * GetTask of a task paused with its approval pending (asked while a pause was requested, or timed
 * out to a pause) shows the approval without a deadline: none runs while the task is paused, and
 * ResumeTask sets one, counted from the resume.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { GetTaskResponse } from '@sluice/api';
import { createTask, type PendingApproval, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'asks-while-pausing',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'draft',
  steps: [
    { name: 'draft', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 },
    { name: 'publish', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 },
  ],
};

describe('GetTask of a task paused with its approval pending', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'paused-approval', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('shows the approval without a deadline until a resume sets one', async () => {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    // As the outcome applier leaves a step that asked for an approval while a pause was requested.
    const approval: PendingApproval = {
      prompt: 'Publish?',
      step: 'draft',
      timeoutMs: 3_600_000,
      onTimeout: 'cancel',
      deadline: new Date(Date.now() + 3_600_000).toISOString(),
      then: { type: 'next', step: 'publish', input: {} },
      originSeq: 1,
    };
    await server.handle.sql`
      update tasks set status = 'paused', approval_pending = true, started_at = now(),
        approval = ${JSON.stringify(approval)}::jsonb
      where id = ${task.id}`;

    const got = await server.rpc('GetTask', { task_id: task.id });
    assert.equal(got.code, grpc.status.OK);
    const shown = (got.response as GetTaskResponse).task.approval;
    assert.equal(shown?.prompt, 'Publish?');
    // No timer exists while paused: the deadline stored at the pause will never fire.
    assert.equal(shown?.deadline, null);

    const resumed = await server.rpc('ResumeTask', { task_id: task.id });
    assert.equal(resumed.code, grpc.status.OK);
    const [timer] = await server.handle.sql<{ due_at: Date }[]>`
      select due_at from task_timers where task_id = ${task.id} and done_at is null`;
    const after = await server.rpc('GetTask', { task_id: task.id });
    const deadline = (after.response as GetTaskResponse).task.approval?.deadline;
    assert.ok(deadline && timer);
    assert.equal(
      Number(deadline.seconds) * 1_000 + Math.floor(deadline.nanos / 1e6),
      new Date(timer.due_at).getTime(),
    );
  });
});

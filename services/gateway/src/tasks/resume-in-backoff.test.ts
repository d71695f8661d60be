/**
 * A task paused while its step failed with attempts left keeps that step's retry in the ready
 * queue, due after its backoff. Resumed before the backoff ends, it shows what a task waiting out a
 * backoff shows — FAILED_RETRYABLE, the failure and `next_attempt_time`, no queue standing — and a
 * durable timer makes it QUEUED when the retry is due; resumed after, it is QUEUED at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { GetTaskResponse } from '@sluice/api';
import { appendTaskEvent, createTask, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'paused-in-backoff',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 3 }],
};

describe('ResumeTask of a task paused during a retry backoff', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'resume-in-backoff', manifest });
  });
  after(async () => {
    await server?.close();
  });

  /** A paused task whose step failed (503) and waits to retry at `dueAt`, as the scheduler leaves it. */
  async function pausedInBackoff(dueAt: Date): Promise<string> {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await server.handle.sql`
      update tasks set status = 'paused', started_at = now() where id = ${task.id}`;
    await server.handle.sql`
      update task_steps set status = 'ready', attempts = 1, due_at = ${dueAt.toISOString()}
      where task_id = ${task.id}`;
    await appendTaskEvent(server.handle.db, {
      taskId: task.id,
      type: 'step_retry_scheduled',
      step: 'call',
      data: {
        error_class: 'external_5xx',
        message: 'HTTP 503',
        attempts: 1,
        next_attempt_at: dueAt.toISOString(),
      },
    });
    return task.id;
  }

  async function taskOf(taskId: string) {
    const got = await server.rpc('GetTask', { task_id: taskId });
    assert.equal(got.code, grpc.status.OK);
    return (got.response as GetTaskResponse).task;
  }

  it('shows the task failed_retryable with its next attempt until the backoff ends', async () => {
    const dueAt = new Date(Date.now() + 60_000);
    const taskId = await pausedInBackoff(dueAt);
    // Other work due now on the resource: a queued task would count it as ahead.
    await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });

    const resumed = await server.rpc('ResumeTask', { task_id: taskId });
    assert.equal(resumed.code, grpc.status.OK);
    const task = await taskOf(taskId);
    assert.equal(task.status, 'TASK_STATUS_FAILED_RETRYABLE');
    assert.equal(task.error?.error_class, 'ERROR_CLASS_EXTERNAL_5XX');
    assert.equal(task.error?.message, 'HTTP 503');
    const next = task.next_attempt_time;
    assert.ok(next, 'next_attempt_time is set');
    assert.equal(Number(next.seconds) * 1_000 + Math.floor(next.nanos / 1e6), dueAt.getTime());
    assert.equal(task.queue_position, 0);
    assert.equal(task.estimated_wait, null);
    // The timer that makes it queued when the retry is due.
    const timers = await server.handle.sql<{ kind: string; due_at: Date }[]>`
      select kind, due_at from task_timers where task_id = ${taskId} and done_at is null`;
    assert.deepEqual(
      timers.map((timer) => ({ kind: timer.kind, dueAt: new Date(timer.due_at).getTime() })),
      [{ kind: 'retry_backoff', dueAt: dueAt.getTime() }],
    );
  });

  it('queues the task at once when the backoff ended while it was paused', async () => {
    const taskId = await pausedInBackoff(new Date(Date.now() - 1_000));
    const resumed = await server.rpc('ResumeTask', { task_id: taskId });
    assert.equal(resumed.code, grpc.status.OK);
    assert.equal((await taskOf(taskId)).status, 'TASK_STATUS_QUEUED');
  });
});

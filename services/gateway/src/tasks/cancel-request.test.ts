/**
 * `CancelTask` of a running task publishes the cancel request that aborts its running steps on
 * their executors. The executors know a step by its task's stored id (lower case, as Postgres
 * prints a `uuid`); the API accepts the id in any case, so the request must name the stored id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { Subscription } from '@nats-io/transport-node';
import { decodeMessageOf } from '@sluice/bus';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'cancelled',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('the cancel request of CancelTask', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'cancel-request', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('names the stored task id when the caller spells it in capitals', async () => {
    const { handle, nc, catalog } = server;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running' where id = ${task.id}`;
    const requests: Array<{ subject: string; taskId: string }> = [];
    const subscription: Subscription = nc.subscribe(catalog.subjects.cancelAll, {
      callback: (error, message) => {
        if (error) return;
        const request = decodeMessageOf('task.cancel', message.subject, message.data);
        requests.push({ subject: message.subject, taskId: request.task_id });
      },
    });
    await nc.flush();
    try {
      const cancelled = await server.rpc('CancelTask', { task_id: task.id.toUpperCase() });
      assert.equal(cancelled.code, grpc.status.OK);
      const deadline = Date.now() + 2_000;
      while (requests.length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(requests, [{ subject: catalog.subjects.cancel(task.id), taskId: task.id }]);
    } finally {
      subscription.unsubscribe();
    }
  });
});

describe('the reason of CancelTask', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'cancel-reason', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('is held to 4,000 characters, not UTF-16 units', async () => {
    const { handle } = server;
    const created = () =>
      createTask(handle.db, { tenantId: 'acme', taskType: manifest, priority: 2, input: {} });
    // 4,000 characters outside the Basic Multilingual Plane: 8,000 UTF-16 units.
    const { task } = await created();
    const accepted = await server.rpc('CancelTask', {
      task_id: task.id,
      reason: '🛑'.repeat(4_000),
    });
    assert.equal(accepted.code, grpc.status.OK);
    const { task: other } = await created();
    const refused = await server.rpc('CancelTask', {
      task_id: other.id,
      reason: '🛑'.repeat(4_001),
    });
    assert.equal(refused.code, grpc.status.INVALID_ARGUMENT);
  });
});

/**
 * The idempotency key of `CreateTask` and `CreateTasks` is held to 256 characters (code points), as
 * its refusal says, and a key of that length is stored and answered as it was given.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { CreateTaskResponse } from '@sluice/api';
import type { TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'keyed',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

const create = (idempotencyKey: string) => ({
  type: 'keyed',
  priority: 'PRIORITY_P2',
  input: '{}',
  idempotency_key: idempotencyKey,
});

describe('the idempotency key of a create', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'idempotency-key', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('is held to 256 characters, not UTF-16 units', async () => {
    // 256 characters outside the Basic Multilingual Plane: 512 UTF-16 units, 1,024 UTF-8 bytes.
    const key = '🔑'.repeat(256);
    const accepted = await server.rpc('CreateTask', create(key));
    assert.equal(accepted.code, grpc.status.OK, accepted.details);
    const { task } = accepted.response as CreateTaskResponse;
    assert.equal(task?.idempotency_key, key);
    const again = await server.rpc('CreateTask', create(key));
    assert.equal(again.code, grpc.status.OK, again.details);
    assert.equal((again.response as CreateTaskResponse).created, false);
    assert.equal((again.response as CreateTaskResponse).task?.task_id, task?.task_id);

    const batch = await server.rpc('CreateTasks', { tasks: [create('🗝️'.repeat(128))] });
    assert.equal(batch.code, grpc.status.OK, batch.details);

    const refused = await server.rpc('CreateTask', create('🔑'.repeat(257)));
    assert.equal(refused.code, grpc.status.INVALID_ARGUMENT);
    assert.match(refused.details ?? '', /at most 256 printable characters/);
  });
});

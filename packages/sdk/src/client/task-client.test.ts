import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTaskClient, type CreateTaskParams } from './task-client.js';

describe('createTaskClient', () => {
  it('rejects, not throws, a create whose input JSON cannot carry (a bigint, a cycle)', async () => {
    // Nothing listens there: the input is refused before any call is made.
    const client = createTaskClient({
      address: '127.0.0.1:9',
      apiKey: 'sk_test',
      timeoutMs: 1_000,
    });
    try {
      const cyclic: Record<string, unknown> = {};
      cyclic['self'] = cyclic;
      for (const input of [{ n: 1n }, cyclic]) {
        let created: Promise<unknown> | undefined;
        assert.doesNotThrow(() => {
          created = client.createTask({ type: 'brief', priority: 'PRIORITY_P2', input });
        });
        await assert.rejects(created as Promise<unknown>, TypeError);
      }
    } finally {
      client.close();
    }
  });

  it('rejects an empty idempotency key rather than creating the task without one', async () => {
    // `idempotencyKey: process.env.KEY ?? ''` with KEY unset asks for a repeat-safe create: sent
    // as the API's "no key", a retry would create the task again. Nothing listens at the address.
    const client = createTaskClient({
      address: '127.0.0.1:9',
      apiKey: 'sk_test',
      timeoutMs: 1_000,
    });
    try {
      const params: CreateTaskParams = {
        type: 'brief',
        priority: 'PRIORITY_P2',
        input: {},
        idempotencyKey: '',
      };
      const refusal = (field: string) => (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.equal(error.message, `${field} must not be empty; leave it out for no key`);
        return true;
      };
      await assert.rejects(client.createTask(params), refusal('idempotencyKey'));
      await assert.rejects(
        client.createTasks([{ ...params, idempotencyKey: 'k' }, params]),
        refusal('tasks[1].idempotencyKey'),
      );
    } finally {
      client.close();
    }
  });
});

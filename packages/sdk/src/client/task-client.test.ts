import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTaskClient } from './task-client.js';

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
});

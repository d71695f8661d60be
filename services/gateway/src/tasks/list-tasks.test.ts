/**
 * `ListTasks`' page size: 0 asks for the server's default, a larger size than the server's maximum
 * is lowered to it (as the API's `page_size` says, and as ListTenants and ListDeadLetters do),
 * and only a negative one is refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { ListTasksResponse } from '@sluice/api';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import { MAX_PAGE_SIZE } from './task-service.js';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'listed',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('the page size of ListTasks', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'list-tasks', manifest });
    // One task more than the largest page.
    const tasks = Array.from({ length: MAX_PAGE_SIZE + 1 }, () => ({
      tenantId: 'acme',
      taskType: manifest,
      priority: 2 as const,
      input: {},
    }));
    for (const task of tasks) await createTask(server.handle.db, task);
  });
  after(async () => {
    await server?.close();
  });

  it('lowers a page size above the maximum to it', async () => {
    for (const pageSize of [MAX_PAGE_SIZE + 1, 2 ** 31 - 1]) {
      const { code, response } = await server.rpc('ListTasks', { page_size: pageSize });
      assert.equal(code, grpc.status.OK, `page_size ${pageSize}`);
      const page = response as ListTasksResponse;
      assert.equal(page.tasks.length, MAX_PAGE_SIZE);
      assert.notEqual(page.next_page_token, '', 'a page follows');
    }
  });

  it('refuses a negative page size', async () => {
    const { code } = await server.rpc('ListTasks', { page_size: -1 });
    assert.equal(code, grpc.status.INVALID_ARGUMENT);
  });
});

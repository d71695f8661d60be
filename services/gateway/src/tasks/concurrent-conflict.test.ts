/**
 * A lifecycle request whose transition keeps losing to concurrent changes of its task answers
 * ABORTED (gRPC's code for a concurrency conflict the client should retry), not FAILED_PRECONDITION
 * (the task's state does not allow it: retrying the same call cannot help), and changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'contended',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('a lifecycle request that keeps conflicting', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'concurrent-conflict', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('answers ABORTED and changes nothing', async () => {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    // Every update of this task's state finds its version moved, as when other writers change the
    // task between each read and update: the transition's conditional update matches no row.
    await server.handle.sql.unsafe(`
      create function pg_temp_conflict() returns trigger language plpgsql as $$
      begin
        if old.id = '${task.id}' then return null; end if;
        return new;
      end $$;
      create trigger conflict before update on tasks
        for each row execute function pg_temp_conflict();`);
    try {
      const paused = await server.rpc('PauseTask', { task_id: task.id });
      assert.equal(paused.code, grpc.status.ABORTED, paused.details);
      assert.match(paused.details ?? '', /concurrently/);
    } finally {
      await server.handle.sql.unsafe(
        'drop trigger conflict on tasks; drop function pg_temp_conflict();',
      );
    }
    const [row] = await server.handle.sql<{ status: string }[]>`
      select status from tasks where id = ${task.id}`;
    assert.equal(row?.status, 'queued');
  });
});

/**
 * `WatchTask` of a task retried after it ended: its history holds a final event (the cancel or
 * failure the retry started from) followed by the retry's events. The watch ends at the event that
 * puts the task in a final state for good, not at one a later `retry` event undid.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { WatchTaskResponse } from '@sluice/api';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'retried',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('WatchTask of a task retried after it ended', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ name: 'watch-retried', manifest });
  });
  after(async () => {
    await server?.close();
  });

  it('replays past the earlier end and follows the retried task to its next end', async () => {
    const { handle } = server;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const ok = async (name: string, request: object) =>
      assert.equal((await server.rpc(name, request)).code, grpc.status.OK, name);
    await ok('CancelTask', { task_id: task.id });
    await ok('RetryTask', { task_id: task.id });

    const stream = server.watch({ task_id: task.id, after_seq: '0' }, 10_000);
    const events: string[] = [];
    let ended = false;
    stream.on('data', ({ event }: WatchTaskResponse) => {
      if (event) events.push(`${event.seq}:${event.type}`);
    });
    const done = new Promise<void>((resolve, reject) => {
      stream.on('end', () => {
        ended = true;
        resolve();
      });
      stream.on('error', reject);
    });
    try {
      // The task is queued again: the history is replayed and the watch goes on.
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.deepEqual(
        { events, ended },
        { events: ['1:create', '2:cancel', '3:retry'], ended: false },
      );
      await ok('CancelTask', { task_id: task.id });
      await done;
      assert.deepEqual(events, ['1:create', '2:cancel', '3:retry', '4:cancel']);
    } finally {
      stream.cancel();
    }
  });

  it('ends at a final state followed by facts about its steps', async () => {
    const { handle } = server;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const stream = server.watch({ task_id: task.id, after_seq: '0' }, 10_000);
    const events: string[] = [];
    stream.on('data', ({ event }: WatchTaskResponse) => {
      if (event) events.push(`${event.seq}:${event.type}`);
    });
    const done = new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The end and a fact recorded after it, committed together.
      await handle.sql.begin(async (sql) => {
        await sql`
          insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step)
          values (${task.id}::uuid, 'acme', 2, 'cancel', 'queued', 'cancelled', null),
                 (${task.id}::uuid, 'acme', 3, 'step_cancelled', null, null, 'call')`;
        await sql`update tasks set status = 'cancelled', last_event_seq = 3 where id = ${task.id}`;
      });
      await done;
      assert.deepEqual(events, ['1:create', '2:cancel', '3:step_cancelled']);
    } finally {
      stream.cancel();
    }
  });
});

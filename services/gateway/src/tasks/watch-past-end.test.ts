/**
 * A `WatchTask` with `after_seq` past the task's last event is refused: the stream sends only the
 * events after it, so the task's next events — its end among them — would never be sent and the
 * watch would wait for good, also after the task finished.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'watched-past-end',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

describe('WatchTask after the last event', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer({ name: 'watch-past-end', manifest });
  });
  after(async () => {
    await server?.close();
  });

  /** The stream's first message, its end, or its error, whichever comes first. */
  function watch(taskId: string, afterSeq: number) {
    const stream = server.watch({ task_id: taskId, after_seq: String(afterSeq) }, 5_000);
    return new Promise<string>((resolve) => {
      stream.on('data', () => {
        resolve('data');
        stream.cancel();
      });
      stream.on('end', () => resolve('end'));
      stream.on('error', (error: grpc.ServiceError) =>
        resolve(`${grpc.status[error.code]}: ${error.details}`),
      );
    });
  }

  it('refuses after_seq past the last event of a task still going on', async () => {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const [row] = await server.handle.sql<{ last_event_seq: number }[]>`
      select last_event_seq from tasks where id = ${task.id}`;
    const last = row?.last_event_seq ?? 0;
    assert.ok(last >= 1, 'the create is an event');
    assert.equal(
      await watch(task.id, last + 5),
      `INVALID_ARGUMENT: after_seq: after_seq ${last + 5} is past the task's last event (${last}); pass a sequence a watch or GetTask's last_event_seq gave`,
    );
  });

  it('follows a task from its last event, and from one before it', async () => {
    const { task } = await createTask(server.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await server.handle.sql`
      insert into task_events (task_id, tenant_id, seq, type, data)
      values (${task.id}::uuid, 'acme', 2, 'step_progress', '{}'::jsonb)`;
    await server.handle.sql`update tasks set last_event_seq = 2 where id = ${task.id}`;
    assert.equal(await watch(task.id, 1), 'data', 'the event after it is sent');
    // Nothing after the last event yet: the stream waits (its deadline ends it here).
    assert.match(await watch(task.id, 2), /^DEADLINE_EXCEEDED/);
  });
});

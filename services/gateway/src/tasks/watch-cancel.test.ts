/**
 * A `WatchTask` whose client stops reading and then cancels ends on the gateway: its handler
 * returns and its listener on the event hub goes. A handler waiting for the stream to drain (the
 * client's flow control window full) waited for a `'drain'` that a cancelled call never emits, so
 * each such watch stayed on the gateway for good, with its buffered events and its listener.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTask, type TaskTypeManifest } from '@sluice/db';
import type { FinishedCall } from '../grpc/handler-adapter.js';
import type { EventHub } from './event-hub.js';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'watched',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};
/** Events of 16 KB each: far more than a stream's flow control window and buffers hold. */
const EVENTS = 400;

describe('WatchTask cancelled while its writes wait for the client', () => {
  let server: TestServer;
  let listening = 0;
  const finished: FinishedCall[] = [];

  before(async () => {
    server = await startTestServer({
      name: 'watch-cancel',
      manifest,
      onCallFinished: (call) => void finished.push(call),
      // Counts the watchers listening on the hub.
      hub: (hub): EventHub => ({
        async listen(taskId, listener) {
          const stop = await hub.listen(taskId, listener);
          listening += 1;
          return () => {
            listening -= 1;
            stop();
          };
        },
        close: () => hub.close(),
      }),
    });
  });
  after(async () => {
    await server?.close();
  });

  it('ends the handler and stops listening once the client cancels', async () => {
    const { handle } = server;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await handle.sql`
      insert into task_events (task_id, tenant_id, seq, type, data)
      select ${task.id}::uuid, 'acme', seq, 'step_progress',
             jsonb_build_object('message', repeat('x', 16000))
      from generate_series(2, ${EVENTS + 1}) as seq`;
    await handle.sql`update tasks set last_event_seq = ${EVENTS + 1} where id = ${task.id}`;

    const stream = server.watch({ task_id: task.id, after_seq: '0' }, 30_000);
    stream.on('error', () => undefined); // the cancel's own CANCELLED
    // Reads one message, then nothing: the windows fill and the gateway's writes wait.
    await new Promise((resolve) => stream.once('data', resolve));
    stream.pause();
    await waitFor(() => listening === 1, 'the watch listens');
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.ok(!finished.some((call) => call.method.endsWith('/WatchTask')), 'still streaming');
    stream.cancel();
    await waitFor(
      () => finished.some((call) => call.method.endsWith('/WatchTask')),
      'the WatchTask handler ends',
    );
    assert.equal(listening, 0, 'the watch no longer listens on the hub');
  });
});

async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

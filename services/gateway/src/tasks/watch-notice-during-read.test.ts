/**
 * A `WatchTask` woken by an event notice while it reads the task's events: the event may have been
 * committed after the read's snapshot (the relay publishes its notice right after the commit), so
 * the read does not return it, and the watch must read again. The wake-up was dropped when the
 * read ended, and the event reached the client only at the next re-check
 * (`SLUICE_WATCH_RECHECK_MS`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTask, type Database, type TaskTypeManifest } from '@sluice/db';
import type { EventHub, EventListener } from './event-hub.js';
import { startTestServer, type TestServer } from './test-server.js';

const manifest: TaskTypeManifest = {
  name: 'watched-notice',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};

/** Far longer than the test waits: an event it sees came by its notice, not by the re-check. */
const RECHECK_MS = 120_000;

describe('WatchTask woken while it reads', () => {
  let server: TestServer;
  /** The watch's listener on the hub: the test delivers the notices itself. */
  let notify: EventListener | undefined;
  /** Reads of task events that returned their rows. */
  let eventReads = 0;
  /** Set: the next read of events, its rows in hand, waits for this before it returns them. */
  let hold: Promise<void> | undefined;
  let holding = false;

  before(async () => {
    server = await startTestServer({
      name: 'watch-notice-during-read',
      manifest,
      watchRecheckMs: RECHECK_MS,
      hub: (hub): EventHub => ({
        async listen(taskId, listener) {
          notify = listener;
          return hub.listen(taskId, listener);
        },
        close: () => hub.close(),
      }),
      db: (db) => holdingEventReads(db),
    });
  });
  after(async () => {
    await server?.close();
  });

  /** `db`, whose reads of task events (rows with a `seq`) count and wait for {@link hold}. */
  function holdingEventReads(db: Database): Database {
    return new Proxy(db, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        if (property !== 'select') return (value as (...args: unknown[]) => unknown).bind(target);
        return (...args: unknown[]) => {
          const builder = (
            value as (...a: unknown[]) => { from: (...a: unknown[]) => object }
          ).apply(target, args);
          const from = builder.from.bind(builder);
          builder.from = (...fromArgs: unknown[]) => {
            const query = from(...fromArgs) as PromiseLike<unknown>;
            const then = query.then.bind(query);
            (query as { then: unknown }).then = (
              onFulfilled?: (rows: unknown) => unknown,
              onRejected?: (error: unknown) => unknown,
            ) =>
              then(async (rows) => {
                const first = Array.isArray(rows) ? (rows[0] as object | undefined) : undefined;
                if (Array.isArray(rows) && (first === undefined || 'seq' in first)) {
                  const gate = hold;
                  hold = undefined;
                  if (gate) {
                    holding = true;
                    await gate;
                    holding = false;
                  }
                  eventReads += 1;
                }
                return rows;
              }).then(onFulfilled, onRejected);
            return query;
          };
          return builder;
        };
      },
    });
  }

  it('reads again, and sends the event at once', async () => {
    const { handle } = server;
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    const stream = server.watch({ task_id: task.id, after_seq: '1' }, 30_000);
    const received: string[] = [];
    stream.on('data', (response: { event: { seq: string } }) => received.push(response.event.seq));
    stream.on('error', () => undefined); // the cancel's own CANCELLED
    try {
      await waitFor(() => notify !== undefined && eventReads >= 1, 'the watch has read once');
      const readsBefore = eventReads;

      // A notice wakes the watch; its read takes its snapshot and is held there.
      let release!: () => void;
      hold = new Promise<void>((resolve) => (release = resolve));
      notify?.(2);
      await waitFor(() => holding, 'the read is under way');
      // Event 2 commits after that snapshot, and its notice comes while the read still runs.
      await handle.sql`
        insert into task_events (task_id, tenant_id, seq, type, data)
        values (${task.id}::uuid, 'acme', 2, 'step_progress', '{}'::jsonb)`;
      await handle.sql`update tasks set last_event_seq = 2 where id = ${task.id}`;
      notify?.(2);
      release();
      await waitFor(() => eventReads > readsBefore, 'the held read returned');

      await waitFor(() => received.includes('2'), 'event 2 reaches the client', 5_000);
    } finally {
      stream.cancel();
    }
  });
});

async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

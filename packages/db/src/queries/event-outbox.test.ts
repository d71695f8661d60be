/**
 * The outbox of task events against a real Postgres: every statement that writes events puts their
 * ids in it (the relay publishes nothing else), and the relay's read takes the oldest ids and finds
 * each event by its key, however many events the table holds.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { DatabaseHandle } from '../client.js';
import {
  createQueuedTasks,
  oneStepManifest,
  openTaskTypeDatabase,
  type TaskTypeDatabase,
} from '../testing/index.js';
import { applyTransition } from '../transition.js';
import { appendTaskEvent, unpublishedEvents, unpublishedEventsStatement } from './events.js';
import { explainAnalyze } from './explain.js';

const manifest = oneStepManifest();
const SOURCE_ROOT = fileURLToPath(new URL('..', import.meta.url));

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 4 });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

const createTasks = (count: number) => createQueuedTasks(handle.db, 'acme', manifest, count);

/** Ids of the events that are not in the outbox. */
async function eventsOutsideTheOutbox(): Promise<number[]> {
  const rows = await handle.sql<{ id: string }[]>`
    select id from task_events e
    where not exists (select 1 from task_event_outbox o where o.event_id = e.id)`;
  return rows.map((row) => Number(row.id));
}

/** The source files of this package that are not tests. */
async function sourceFiles(folder: string): Promise<string[]> {
  const names = await readdir(folder, { recursive: true });
  return names
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
    .map((name) => join(folder, name));
}

describe('the task event outbox', () => {
  it('holds every event a create, a transition and an appended event wrote', async () => {
    const [first] = (await createTasks(2)) as [string, string];
    const started = await applyTransition(handle.db, { taskId: first, event: { type: 'start' } });
    assert.equal(started.ok, true);
    await appendTaskEvent(handle.db, { taskId: first, type: 'step_progress' });
    const [counted] = await handle.sql<{ events: number }[]>`
      select count(*)::int as events from task_events`;
    assert.equal(counted?.events, 4);
    assert.deepEqual(await eventsOutsideTheOutbox(), []);
  });

  it('is written by every statement of this package that inserts events', async () => {
    // The statements are SQL text; one that inserted events without their outbox ids would leave
    // them unpublished for good, with nothing failing. Each insert's statement runs from it to the
    // end of its template literal.
    const inserts = /insert into (?:task_events|\$\{taskEvents\})\s*\(/g;
    let found = 0;
    for (const file of await sourceFiles(SOURCE_ROOT)) {
      const text = await readFile(file, 'utf8');
      for (const match of text.matchAll(inserts)) {
        found += 1;
        const end = text.indexOf('`', match.index);
        const statement = text.slice(match.index, end === -1 ? undefined : end);
        assert.match(
          statement,
          /insert into task_event_outbox \(event_id\) select id from \w+/,
          `${file}: an insert of task events without its outbox ids`,
        );
      }
    }
    // The create, the two transition statements, the appended event, the step start and outcome.
    assert.equal(found, 6);
  });

  it('gives the relay the oldest unpublished events by their keys, not by reading the events', async () => {
    await createTasks(3_000);
    const waiting = await handle.sql<{ id: string }[]>`
      select event_id as id from task_event_outbox order by event_id desc limit 5`;
    const waitingIds = waiting.map((row) => Number(row.id)).sort((a, b) => a - b);
    await handle.sql`delete from task_event_outbox where event_id <> all(${waitingIds})`;
    await handle.sql`analyze task_events`;
    await handle.sql`analyze task_event_outbox`;

    const leftOut = waitingIds[1] as number;
    const read = await unpublishedEvents(handle.db, 3, [leftOut]);
    assert.deepEqual(
      read.map((event) => event.id),
      waitingIds.filter((id) => id !== leftOut).slice(0, 3),
    );
    const plan = (await explainAnalyze(handle.db, unpublishedEventsStatement(3, [leftOut]))).join(
      '\n',
    );
    assert.doesNotMatch(plan, /Seq Scan on task_events/);
    assert.match(plan, /Index Scan using task_events_pkey on task_events/);
  });
});

/**
 * Batch creation against the real Postgres: a batch writes what one create per entry would, in
 * order; keys behave per entry (repeats, conflicts that undo the whole batch, keys of deleted
 * tasks, a race with retention); concurrent batches sharing keys neither deadlock nor duplicate.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { SluiceError, type Json } from '@sluice/core';
import type { SQL } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import type { Database, DatabaseHandle } from '../client.js';
import * as schema from '../schema.js';
import {
  markTaskFinished,
  openTaskTypeDatabase,
  waitForLockWaiter,
  type TaskTypeDatabase,
} from '../testing/index.js';
import { isRefusedOnPurpose } from '../refused.js';
import { explainAnalyze } from './explain.js';
import { deleteFinishedTasks } from './retention.js';
import { keyedBatchCheck, submitTasks, submitTasksClaiming } from './task-batch.js';
import type { TaskTypeManifest } from './task-types.js';
import { createTask, submitTask, type NewTask, type SubmitTaskResult } from './tasks.js';

const manifest: TaskTypeManifest = {
  name: 'two-steps',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'first',
  steps: [
    { name: 'first', resource: 'llm', timeoutMs: 1000, maxAttempts: 1 },
    { name: 'second', resource: 'tool:http', timeoutMs: 1000, maxAttempts: 1 },
  ],
};

const DAY_MS = 24 * 60 * 60 * 1_000;

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

beforeEach(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 8 });
  handle = fixture.handle;
});

afterEach(async () => {
  await fixture?.close();
});

function request(extra: Partial<NewTask> = {}): NewTask {
  return { tenantId: 'acme', taskType: manifest, priority: 2, input: { n: 1 }, ...extra };
}

function idOf(result: SubmitTaskResult): string {
  return result.kind === 'deleted' ? result.tombstone.taskId : result.task.id;
}

async function count(table: 'tasks' | 'task_steps' | 'task_events'): Promise<number> {
  const [row] = await handle.sql<
    { n: number }[]
  >`select count(*)::int as n from ${handle.sql(table)}`;
  return row?.n ?? -1;
}

/** What a call answered, and how many socket writes the driver made for it. */
interface Counted<T> {
  readonly value: T;
  readonly writes: number;
}

/**
 * Runs `body` with a pool of one connection to the fixture's database whose socket counts the
 * writes the driver makes; `counted` gives those of one call.
 */
async function withCountedWrites(
  body: (
    db: Database,
    counted: <T>(call: () => Promise<T>) => Promise<Counted<T>>,
  ) => Promise<void>,
): Promise<void> {
  let writes = 0;
  const url = new URL(fixture.database.url);
  const options = {
    max: 1,
    onnotice: () => {},
    socket: () => {
      const socket = connect({ host: url.hostname, port: Number(url.port || 5432) });
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = (...args: unknown[]) => {
        writes += 1;
        return write(...args);
      };
      return socket;
    },
  } as postgres.Options<Record<string, postgres.PostgresType>>; // `socket`: not in the types
  const client = postgres(fixture.database.url, options);
  const db: Database = drizzle(client, { schema });
  const counted = async <T>(call: () => Promise<T>): Promise<Counted<T>> => {
    writes = 0;
    const value = await call();
    return { value, writes };
  };
  try {
    await body(db, counted);
  } finally {
    await client.end();
  }
}

/** A row as `to_jsonb` gives it. */
type JsonRow = { row: unknown };

/** What a task's rows say, without what differs between any two tasks (ids, times). */
async function rowsOf(taskId: string) {
  const [task] = await handle.sql<JsonRow[]>`
    select to_jsonb(t) - array['id', 'created_at', 'updated_at'] as row
    from tasks t where id = ${taskId}`;
  const events = await handle.sql<JsonRow[]>`
    select to_jsonb(e) - array['id', 'task_id', 'created_at'] as row
    from task_events e where task_id = ${taskId} order by seq`;
  const steps = await handle.sql<JsonRow[]>`
    select to_jsonb(s) - array['id', 'task_id', 'due_at', 'created_at'] as row
    from task_steps s where task_id = ${taskId} order by seq`;
  return {
    task: task?.row,
    events: events.map((e) => e.row),
    steps: steps.map((s) => s.row),
  };
}

describe('submitTasks', () => {
  it('writes each entry as createTask writes one task, and answers in the order given', async () => {
    const traceParent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const entries = [
      request({ input: { n: 1 }, priority: 0 }),
      request({ input: { n: 2 }, traceParent, traceId: '0af7651916cd43dd8448eb211c80319c' }),
      request({ input: { nested: { list: [1, 'two', null] } } as Json, priority: 3 }),
    ];
    const results = await submitTasks(handle.db, entries);
    assert.deepEqual(
      results.map((r) => r.kind),
      ['created', 'created', 'created'],
    );
    for (const [index, result] of results.entries()) {
      assert.ok(result.kind === 'created');
      assert.deepEqual(result.task.input, entries[index]?.input);
      assert.equal(result.task.priority, entries[index]?.priority);
      const twin = await createTask(handle.db, entries[index] ?? request());
      assert.deepEqual(await rowsOf(result.task.id), await rowsOf(twin.task.id));
    }
    assert.equal(await count('tasks'), 6);
    assert.deepEqual(await submitTasks(handle.db, []), []);
  });

  it('answers a repeated key with the existing task and creates only the new entries', async () => {
    const first = await submitTask(handle.db, request({ idempotencyKey: 'a', input: { n: 1 } }));
    const results = await submitTasks(handle.db, [
      request({ idempotencyKey: 'b', input: { n: 2 } }),
      request({ idempotencyKey: 'a', input: { n: 1 } }),
      request({ input: { n: 3 } }),
    ]);
    assert.deepEqual(
      results.map((r) => r.kind),
      ['created', 'existing', 'created'],
    );
    assert.equal(idOf(results[1]!), idOf(first));
    // The whole batch again: nothing new, the same tasks.
    const again = await submitTasks(handle.db, [
      request({ idempotencyKey: 'b', input: { n: 2 } }),
      request({ idempotencyKey: 'a', input: { n: 1 } }),
    ]);
    assert.deepEqual(
      again.map((r) => [r.kind, idOf(r)]),
      [
        ['existing', idOf(results[0]!)],
        ['existing', idOf(first)],
      ],
    );
    assert.equal(await count('tasks'), 3);
    assert.equal(await count('task_steps'), 3);
    assert.equal(await count('task_events'), 3);
  });

  it('refuses the whole batch when one key was used for another request, writing nothing', async () => {
    await submitTask(handle.db, request({ idempotencyKey: 'taken', input: { n: 1 } }));
    await assert.rejects(
      submitTasks(handle.db, [
        request({ idempotencyKey: 'fresh' }),
        request({ input: { n: 5 } }),
        request({ idempotencyKey: 'taken', input: { n: 2 } }),
      ]),
      (error: unknown) =>
        error instanceof SluiceError &&
        error.code === 'already_exists' &&
        error.message.includes('"taken"'),
    );
    assert.equal(await count('tasks'), 1);
    assert.equal(await count('task_steps'), 1);
    assert.equal(await count('task_events'), 1);
  });

  it('answers a key of a deleted task from its tombstone and creates the rest', async () => {
    const original = await finishedTask({ idempotencyKey: 'old', input: { n: 9 } });
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS))).tombstones, 1);
    const results = await submitTasks(handle.db, [
      request({ idempotencyKey: 'new' }),
      request({ idempotencyKey: 'old', input: { n: 9 } }),
      request(),
    ]);
    assert.deepEqual(
      results.map((r) => r.kind),
      ['created', 'deleted', 'created'],
    );
    assert.equal(idOf(results[1]!), original);
    assert.equal(await count('tasks'), 2);
    assert.equal(await count('task_steps'), 2);
    // A different request under the deleted task's key is refused, as for a live one.
    await assert.rejects(
      submitTasks(handle.db, [request({ idempotencyKey: 'old', input: { n: 10 } })]),
      { code: 'already_exists' },
    );
  });

  it('finds the tombstone when its insert waited for retention deleting the key holder', async () => {
    const original = await finishedTask({ idempotencyKey: 'race' });
    let racing: Promise<SubmitTaskResult[]> | undefined;
    await handle.db.transaction(async (tx) => {
      assert.equal((await deleteFinishedTasks(tx, olderThan(7 * DAY_MS))).tasks, 1);
      racing = submitTasks(handle.db, [request({ idempotencyKey: 'race' }), request()]);
      await waitForLockWaiter(handle.sql);
    });
    assert.ok(racing);
    const results = await racing;
    assert.deepEqual(
      results.map((r) => r.kind),
      ['deleted', 'created'],
    );
    assert.equal(idOf(results[0]!), original);
    assert.equal(await count('tasks'), 1);
  });

  it('makes one task per key of concurrent batches that share keys, in any order', async () => {
    const keys = Array.from({ length: 40 }, (_, i) => `k-${i}`);
    const batchOf = (order: string[]) =>
      submitTasks(
        handle.db,
        order.map((key) => request({ idempotencyKey: key, input: { key } })),
      );
    const batches = await Promise.all([
      batchOf(keys),
      batchOf([...keys].reverse()),
      batchOf(keys.filter((_, i) => i % 2 === 0)),
      batchOf([...keys].reverse()),
    ]);
    const idByKey = new Map<string, string>();
    let created = 0;
    for (const [b, results] of batches.entries()) {
      for (const result of results) {
        assert.ok(result.kind !== 'deleted');
        const key = result.task.idempotencyKey ?? '';
        assert.equal(idByKey.get(key) ?? result.task.id, result.task.id, `batch ${b} key ${key}`);
        idByKey.set(key, result.task.id);
        if (result.kind === 'created') created++;
      }
    }
    assert.equal(idByKey.size, keys.length);
    assert.equal(created, keys.length);
    assert.equal(await count('tasks'), keys.length);
  });

  it('sends a batch whose keys are all new, with its begin and commit, in one write', async () => {
    await withCountedWrites(async (db, counted) => {
      // The first try on a connection prepares its statements (a round trip each).
      await submitTasks(db, [request({ idempotencyKey: 'warm-up' })]);
      const result = await counted(() =>
        submitTasks(db, [request({ idempotencyKey: 'one-write', input: { n: 2 } })]),
      );
      assert.equal(result.value[0]?.kind, 'created');
      assert.equal(result.writes, 1, 'begin, the insert, the check and commit in one write');
    });
    const [row] = await handle.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where idempotency_key = 'one-write'`;
    assert.equal(row?.n, 1, 'committed: another connection sees the task');
  });

  it('sends a P0 create, keyed or not, with its urgent claim in one write', async () => {
    const urgent = { admission: { defaultResourceLimit: 64, agingMs: 30_000 } };
    await withCountedWrites(async (db, counted) => {
      await submitTasksClaiming(db, [request({ priority: 0, idempotencyKey: 'warm-up' })], urgent);
      await submitTasksClaiming(db, [request({ priority: 0 })], urgent);
      for (const idempotencyKey of ['p0-keyed', undefined]) {
        const result = await counted(() =>
          submitTasksClaiming(db, [request({ priority: 0, idempotencyKey })], urgent),
        );
        const created = result.value.results[0];
        assert.ok(created?.kind === 'created', 'created');
        assert.deepEqual(
          result.value.claimed.map((step) => step.taskId),
          [created.task.id],
          'its first step claimed in the create',
        );
        assert.equal(result.writes, 1, 'begin, the insert, its check, the claim and commit');
        const [step] = await handle.sql<{ status: string }[]>`
          select status from task_steps where task_id = ${created.task.id}`;
        assert.equal(step?.status, 'dispatched', 'committed: another connection sees the claim');
      }
    });
  });

  it('leaves nothing of a refused one-write try: a held key and a new one in one batch', async () => {
    // The one-write try inserts the new entry, then its check refuses (the held key was not
    // inserted) and its COMMIT rolls back; the transaction that follows inserts the same entry,
    // under the same id, which only works if the try wrote nothing.
    const [held] = await submitTasks(handle.db, [request({ idempotencyKey: 'held' })]);
    const results = await submitTasks(handle.db, [
      request({ idempotencyKey: 'new', input: { n: 3 } }),
      request({ idempotencyKey: 'held' }),
    ]);
    assert.deepEqual(
      results.map((result) => result.kind),
      ['created', 'existing'],
    );
    assert.equal(idOf(results[1] as SubmitTaskResult), idOf(held as SubmitTaskResult));
    assert.equal(await count('tasks'), 2);
    assert.equal(await count('task_steps'), 2);
    assert.equal(await count('task_events'), 2);
  });

  it("checks a one-write batch by its own tasks, however many the tenant's statistics miss", async () => {
    // A new deployment's first analysis finds the table empty; the tenant then grows to 3,000
    // tasks. Planned from those statistics, `tenant_id = … and id = any(…)` walked all of them.
    await handle.sql`analyze tasks`;
    const batch = await submitTasks(
      handle.db,
      Array.from({ length: 3_000 }, (_, n) => request({ idempotencyKey: `grown-${n}` })),
    );
    const ids = batch.slice(0, 50).map(idOf);
    const plan = (await explainAnalyze(handle.db, keyedBatchCheck('acme', ids, ['fresh']))).join(
      '\n',
    );
    assert.match(plan, /Index Scan using tasks_pkey on tasks t .*loops=50\)/);
    assert.doesNotMatch(plan, /tasks_tenant_created_idx|Seq Scan on tasks/);

    // And it still refuses what it must: an id with no task, a task of another tenant, a live
    // tombstone of one of the keys.
    const refused = (statement: SQL) =>
      assert.rejects(explainAnalyze(handle.db, statement), (error) => isRefusedOnPurpose(error));
    await refused(keyedBatchCheck('acme', [...ids, randomUUID()], []));
    await refused(keyedBatchCheck('globex', ids, []));
    await finishedTask({ idempotencyKey: 'tombstoned' });
    assert.equal((await deleteFinishedTasks(handle.db, olderThan(7 * DAY_MS))).tombstones, 1);
    await refused(keyedBatchCheck('acme', ids, ['tombstoned']));
  });

  it('refuses a batch that repeats a key, or mixes tenants', async () => {
    await assert.rejects(
      submitTasks(handle.db, [request({ idempotencyKey: 'x' }), request({ idempotencyKey: 'x' })]),
      /repeats an idempotency key/,
    );
    await assert.rejects(
      submitTasks(handle.db, [request(), request({ tenantId: 'globex' })]),
      /one tenant/,
    );
    assert.equal(await count('tasks'), 0);
  });
});

/** A task of `acme` that succeeded ten days ago, its events published; returns its id. */
async function finishedTask(extra: Partial<NewTask>): Promise<string> {
  const { task } = await createTask(handle.db, request(extra));
  await markTaskFinished(handle.sql, task.id, new Date(Date.now() - 10 * DAY_MS));
  return task.id;
}

function olderThan(ageMs: number) {
  return { finishedBefore: new Date(Date.now() - ageMs), tombstoneTtlMs: 30 * DAY_MS, limit: 500 };
}

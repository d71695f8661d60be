/**
 * Planner statistics of young queue tables: a prepared statement's plan made on an empty `tasks`
 * table reads the whole table however large it grows, until the table is analyzed; the tables
 * that outgrew their statistics are found, and analyzed by one session at a time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DatabaseHandle } from '../client.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { analyzeQueueTables, queueTablesDueForAnalyze } from './table-statistics.js';

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [], max: 4 });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** Adds `count` finished tasks, and has this session's table statistics reported at once. */
async function addTasks(count: number): Promise<void> {
  await handle.sql.begin(async (tx) => {
    await tx`
      insert into tasks (id, tenant_id, type, type_version, priority, input, input_hash, status)
      select gen_random_uuid(), 'acme', 'bench', 1, 2, '{}', 'h', 'succeeded'
      from generate_series(1, ${count})`;
    await tx`select pg_stat_force_next_flush()`;
  });
}

describe('queue table statistics', () => {
  it('let a plan made on the empty table be made again once the grown table is analyzed', async () => {
    const session = await handle.sql.reserve();
    try {
      // The generic plan, as a prepared statement gets after its first executions.
      await session`set plan_cache_mode = force_generic_plan`;
      await session`prepare lookup(uuid[]) as select id from tasks where id = any($1)`;
      const planOfLookup = async () =>
        (await session<{ 'QUERY PLAN': string }[]>`explain execute lookup('{}')`)
          .map((row) => row['QUERY PLAN'])
          .join('\n');
      assert.match(await planOfLookup(), /Seq Scan on tasks/);

      await addTasks(5_000);
      assert.match(await planOfLookup(), /Seq Scan on tasks/, 'growth alone keeps the plan');

      assert.deepEqual(await queueTablesDueForAnalyze(handle.db), ['tasks']);
      assert.equal(await analyzeQueueTables(handle.db, ['tasks']), true);
      const replanned = await planOfLookup();
      assert.match(replanned, /Index Scan on tasks_pkey|Index (Only )?Scan using tasks_pkey/);
      assert.doesNotMatch(replanned, /Seq Scan/);
      assert.deepEqual(await queueTablesDueForAnalyze(handle.db), []);
    } finally {
      await session`deallocate all`;
      session.release();
    }
  });

  it('calls for another analysis only when the table changed by as many rows as it held', async () => {
    await addTasks(1_000);
    await analyzeQueueTables(handle.db, ['tasks']);
    const [{ live = 0 } = {}] = await handle.sql<
      { live: number }[]
    >`select reltuples::int as live from pg_class where relname = 'tasks'`;
    await addTasks(Math.floor(live / 2));
    assert.deepEqual(await queueTablesDueForAnalyze(handle.db), []);
    await addTasks(live);
    assert.deepEqual(await queueTablesDueForAnalyze(handle.db), ['tasks']);
  });

  it('analyzes in one session at a time', async () => {
    await handle.sql.begin(async (holder) => {
      await holder`select pg_advisory_xact_lock(${0x73746174}, 1)`;
      assert.equal(await analyzeQueueTables(handle.db, ['tasks']), false);
    });
    assert.equal(await analyzeQueueTables(handle.db, ['tasks']), true);
  });
});

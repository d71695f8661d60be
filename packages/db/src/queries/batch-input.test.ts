/**
 * The batch statements of the hot path (group start, group commit, batched transitions) find their
 * tasks by key on a `tasks` table of a few thousand rows: the size at which Postgres, misled by
 * the 100-row estimate of `jsonb_to_recordset`, preferred to read the whole table (see
 * batch-input.ts). Each statement is caught as it is sent and explained instead (in a transaction
 * that is rolled back), so the test reads the plan of exactly what the code builds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { openDatabase, type DatabaseHandle, type Executor } from '../client.js';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { applyLockedTransitions } from '../transition.js';
import { idList, literalLimit, PADDED_UP_TO, textArrayOf } from './batch-input.js';
import { explainAnalyze } from './explain.js';
import { startUsualSteps } from './step-start.js';
import { outcomeWriteStatements } from './step-outcomes.js';
import { hasTasksToSettle } from './tasks-to-settle.js';
import { lockUnappliedOutcomes, markOutcomesApplied } from './unapplied-outcomes.js';
import { createTask, lockTasks } from './tasks.js';

const manifest = oneStepManifest({ resource: 'tool' });
/** Enough rows for the misestimate to pick a sequential scan (it did at 3,000 in a drain). */
const OTHER_TASKS = 3_000;

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let taskId: string;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme'],
    manifests: [manifest],
    max: 4,
  });
  handle = fixture.handle;
  ({
    task: { id: taskId },
  } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  }));
  await handle.db.execute(sql`
    insert into tasks (id, tenant_id, type, type_version, priority, input, input_hash, status)
    select gen_random_uuid(), t.tenant_id, t.type, t.type_version, t.priority, t.input,
           t.input_hash, 'succeeded'
    from tasks t, generate_series(1, ${OTHER_TASKS})
    where t.id = ${taskId}`);
  // Each with a step, running (as under high limits: an index of the running steps is no help),
  // so that a scan of every step row costs what it would.
  await handle.db.execute(sql`
    insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input)
    select t.id, 1, 'work', 'tool', t.tenant_id, t.priority, 'running', '{}'::jsonb
    from tasks t where t.id <> ${taskId}`);
  await handle.db.execute(sql`analyze tasks`);
  await handle.db.execute(sql`analyze task_steps`);
});

after(async () => {
  await fixture?.close();
});

/** Thrown once the statement under test has been explained: the code under test stops there. */
class Explained extends Error {
  constructor(readonly plan: string) {
    super('explained');
  }
}

/**
 * The plan of the first statement `run` sends through `execute`: an executor that explains the
 * statement instead of running it.
 */
async function planOfFirstExecute(run: (executor: Executor) => Promise<unknown>): Promise<string> {
  const db = handle.db;
  const explaining = new Proxy(db, {
    get(target, property, receiver) {
      if (property !== 'execute') return Reflect.get(target, property, receiver) as unknown;
      return async (statement: SQL) => {
        throw new Explained((await explainAnalyze(db, statement)).join('\n'));
      };
    },
  });
  try {
    await run(explaining);
  } catch (error) {
    if (error instanceof Explained) return error.plan;
    throw error;
  }
  throw new Error('the code under test sent no statement through execute');
}

describe('batch statements on a table of thousands of tasks', () => {
  const ref = () => ({ taskId, seq: 1, dispatch: 1 });

  it('group start locks its tasks through the primary key', async () => {
    const plan = await planOfFirstExecute((executor) => startUsualSteps(executor, [ref()], 30_000));
    assert.match(plan, /Index Scan using tasks_pkey|Bitmap Index Scan on tasks_pkey/, plan);
    assert.doesNotMatch(plan, /Seq Scan on tasks/, plan);
  });

  it('group commit locks its tasks through the primary key', async () => {
    const { write } = outcomeWriteStatements([
      { ref: ref(), outcome: { type: 'complete', output: {} } },
    ]);
    const plan = (await explainAnalyze(handle.db, write)).join('\n');
    assert.doesNotMatch(plan, /Seq Scan on tasks/, plan);
    // The steps by their (task, seq) key, with the task's lock joined in (usual completion).
    assert.doesNotMatch(plan, /Seq Scan on task_steps/, plan);
  });

  it('batched transitions update their tasks through the primary key', async () => {
    const locked = await lockTasks(handle.db, [taskId]);
    const plan = await planOfFirstExecute((executor) =>
      applyLockedTransitions(executor, [
        { taskId, event: { type: 'start' }, locked: locked.get(taskId) },
      ]),
    );
    assert.doesNotMatch(plan, /Seq Scan on tasks/, plan);
  });

  it('the outcome pass locks its tasks through the primary key', async () => {
    const plan = await planOfFirstExecute((executor) => lockTasks(executor, [taskId]));
    assert.match(plan, /Index Scan using tasks_pkey|Bitmap Index Scan on tasks_pkey/, plan);
    assert.doesNotMatch(plan, /Seq Scan on tasks/, plan);
  });

  it('a join on the input rows alone reads the whole table at this size (why the fragment exists)', async () => {
    const plan = (
      await explainAnalyze(
        handle.db,
        sql`with input as (
              select * from jsonb_to_recordset(${JSON.stringify([{ task_id: taskId }])}::jsonb)
                as i(task_id uuid)
            )
            select id from tasks where id in (select task_id from input) order by id for update`,
      )
    ).join('\n');
    assert.match(plan, /Seq Scan on tasks/, plan);
  });
});

describe('id lists', () => {
  it('give the planner as many rows as ids, so a plan made on an empty table probes the key', async () => {
    const empty = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [], max: 1 });
    try {
      const session = await empty.handle.sql.reserve();
      try {
        await session`set plan_cache_mode = force_generic_plan`;
        const id = '00000000-0000-4000-8000-000000000001';
        const dialect = new PgDialect();
        for (const [name, list] of [
          ['listed', idList([id])],
          ['arrayed', sql`(select unnest(${textArrayOf([id])}::uuid[]))`],
        ] as const) {
          const query = dialect.sqlToQuery(sql`select id from tasks where id in ${list}`);
          await session.unsafe(`prepare ${name} as ${query.sql}`);
        }
        const planOf = async (name: string, argument: string) =>
          (
            await session.unsafe<{ 'QUERY PLAN': string }[]>(
              `explain execute ${name}('${argument}')`,
            )
          )
            .map((row) => row['QUERY PLAN'])
            .join('\n');
        assert.match(await planOf('listed', id), /tasks_pkey/);
        assert.match(
          await planOf('arrayed', JSON.stringify([id])),
          /Seq Scan on tasks/,
          'why a list',
        );
      } finally {
        await session`deallocate all`;
        session.release();
      }
    } finally {
      await empty.close();
    }
  });
});

describe('statement texts of the outcome pass', () => {
  const dialect = new PgDialect();
  const parametersOf = (fragment: SQL) => dialect.sqlToQuery(fragment).params;

  it('pad id lists to a power of two with the last id, so few texts exist', () => {
    assert.deepEqual(parametersOf(idList([7])), [7]);
    assert.deepEqual(parametersOf(idList([7, 8, 9])), [7, 8, 9, 9]);
    assert.equal(parametersOf(idList(Array.from({ length: 33 }, (_, i) => i))).length, 64);
    const long = Array.from({ length: PADDED_UP_TO + 1 }, (_, i) => i);
    assert.equal(parametersOf(idList(long)).length, PADDED_UP_TO + 1, 'long lists as they are');
    assert.throws(() => idList([]), RangeError);
  });

  it('write limits into the text, and only positive integers', () => {
    const query = dialect.sqlToQuery(sql`select 1 limit ${literalLimit(64)}`);
    assert.deepEqual([query.sql, query.params], ['select 1 limit 64', []]);
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 53]) {
      assert.throws(() => literalLimit(bad), RangeError, String(bad));
    }
  });

  it('are planned once per connection, not at every pass', async () => {
    // One connection, so pg_stat of its prepared statements below is theirs.
    const single = openDatabase(fixture.database.url, { max: 1 });
    try {
      for (let pass = 1; pass <= 8; pass += 1) {
        const stepIds = Array.from({ length: pass }, (_, i) => 1_000_000 + i);
        await single.db.transaction(async (tx) => {
          await lockUnappliedOutcomes(tx, 64);
          await hasTasksToSettle(tx, stepIds);
          await markOutcomesApplied(tx, stepIds);
        });
      }
      const prepared = await single.sql<
        { statement: string; generic_plans: string; custom_plans: string }[]
      >`select statement, generic_plans, custom_plans from pg_prepared_statements`;
      const like = (text: string) => prepared.filter((row) => row.statement.includes(text));
      const [lock, ...moreLocks] = like('with outcome as materialized');
      assert.ok(lock && moreLocks.length === 0, 'one text of the lock');
      assert.equal(Number(lock.custom_plans), 0, 'the lock is never planned for its values');
      const [settle, ...moreSettles] = like('select exists');
      assert.ok(settle && moreSettles.length === 0, 'one text of the settle check');
      assert.ok(Number(settle.generic_plans) > 0, 'its plan is kept');
      assert.equal(like('outcome_applied_at = now()').length, 4, 'marks of 1, 2, 4 and 8 ids');
    } finally {
      await single.close();
    }
  });
});

/**
 * Ready-queue benchmark (issue 4, Retention): does the scheduler's claim stay fast with a million
 * finished tasks in the tables, and after retention deleted them?
 *
 * In a fresh database (dropped at the end) it builds a ready queue of {@link READY} queued tasks
 * with one ready step each, then times the dispatcher's real claim (`claimReadySteps`, in a
 * transaction rolled back after each run, so every run sees the same queue):
 *   (a) with no history,
 *   (b) with {@link HISTORY} finished tasks (one step, three events and an idempotency key each,
 *       inserted with generate_series), after VACUUM ANALYZE,
 *   (c) right after the real retention batches (`deleteFinishedTasks`) deleted them all, and
 *   (d) once VACUUM ANALYZE has run after the deletion.
 * It prints p50/p95/max of each phase, retention's rate, and the claim's EXPLAIN (ANALYZE) plan.
 *
 * Run: `npm run bench:ready-queue` (DATABASE_URL's server; `BENCH_HISTORY`, `BENCH_READY`,
 * `BENCH_RUNS`, `BENCH_RETENTION_BATCH` override the sizes). Not part of `npm test`.
 *
 * Imports go by path: bench/ is not a workspace package (yet; issue 7's suite will make it one).
 */
import { performance } from 'node:perf_hooks';
import {
  claimReadySteps,
  claimReadyStepsStatement,
  createTenant,
  deleteFinishedTasks,
  explainAnalyze,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type Database,
  type DatabaseHandle,
} from '../packages/db/src/index.js';
import { createTestDatabase } from '../packages/db/src/testing/index.js';

const HISTORY = positiveInt('BENCH_HISTORY', 1_000_000);
const READY = positiveInt('BENCH_READY', 1_000);
const RUNS = positiveInt('BENCH_RUNS', 300);
/** The scheduler's default claim batch (SLUICE_SCHEDULER_BATCH). */
const CLAIM_BATCH = 200;
/** The scheduler's default retention batch (SLUICE_RETENTION_BATCH). */
const RETENTION_BATCH = positiveInt('BENCH_RETENTION_BATCH', 500);
/** Finished tasks are inserted this many per statement. */
const INSERT_CHUNK = 100_000;
const TENANT = 'bench';
const TASK_TYPE = 'bench-type';
const DAY_MS = 86_400_000;

function positiveInt(variable: string, fallback: number): number {
  const raw = process.env[variable];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new Error(`${variable} must be a positive whole number, not "${raw}"`);
  }
  return value;
}

function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** Latency summary of one phase, in milliseconds. */
interface Timings {
  readonly p50: number;
  readonly p95: number;
  readonly max: number;
  readonly claimed: number;
}

function percentile(sorted: readonly number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)] ?? Number.NaN;
}

/** Rolls back a timed claim, carrying what it claimed out of the transaction. */
class Undo extends Error {
  constructor(readonly claimed: number) {
    super('claim rolled back');
  }
}

/** Times `RUNS` claims of `CLAIM_BATCH` steps, each rolled back, after a few warm-up runs. */
async function timeClaims(db: Database): Promise<Timings> {
  const once = async (): Promise<{ ms: number; claimed: number }> => {
    let ms = 0;
    try {
      await db.transaction(async (tx) => {
        const started = performance.now();
        const claimed = await claimReadySteps(tx, CLAIM_BATCH);
        ms = performance.now() - started;
        throw new Undo(claimed.length);
      });
    } catch (error) {
      if (error instanceof Undo) return { ms, claimed: error.claimed };
      throw error;
    }
    throw new Error('the timed claim was not rolled back');
  };
  for (let i = 0; i < 10; i++) await once();
  const samples: number[] = [];
  let claimed = 0;
  for (let i = 0; i < RUNS; i++) {
    const run = await once();
    samples.push(run.ms);
    claimed = run.claimed;
  }
  samples.sort((a, b) => a - b);
  return {
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    max: samples.at(-1) ?? Number.NaN,
    claimed,
  };
}

/** The ready queue: `READY` queued tasks, each with one ready, due step, priorities mixed. */
async function insertReadyQueue(handle: DatabaseHandle): Promise<void> {
  await handle.sql`
    with t as (
      insert into tasks (tenant_id, type, type_version, priority, input, input_hash,
        idempotency_key, status, current_step)
      select ${TENANT}, ${TASK_TYPE}, 1, i % 4, jsonb_build_object('n', i), md5(i::text),
        'ready-' || i, 'queued', 'only'
      from generate_series(1, ${READY}::int) i
      returning id, priority
    )
    insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input, due_at)
    select id, 1, 'only', 'llm', ${TENANT}, priority, 'ready', '{}'::jsonb,
      now() - random() * interval '10 minutes'
    from t`;
}

/**
 * `HISTORY` tasks that succeeded between 30 and 60 days ago, as the scheduler leaves them: one
 * finished step and three published events each (create, start, succeed), an idempotency key.
 */
async function insertHistory(handle: DatabaseHandle): Promise<void> {
  for (let from = 1; from <= HISTORY; from += INSERT_CHUNK) {
    const to = Math.min(HISTORY, from + INSERT_CHUNK - 1);
    const started = performance.now();
    await handle.sql`
      with t as (
        insert into tasks (tenant_id, type, type_version, priority, input, input_hash,
          idempotency_key, status, current_step, progress, version, last_event_seq, output,
          created_at, started_at, finished_at, updated_at)
        select ${TENANT}, ${TASK_TYPE}, 1, i % 4, jsonb_build_object('n', i), md5(i::text),
          'history-' || i, 'succeeded', 'only', 1, 3, 3, jsonb_build_object('ok', true),
          f - interval '2 minutes', f - interval '1 minute', f, f
        from generate_series(${from}::int, ${to}::int) i,
          lateral (select now() - interval '30 days' - i * interval '2 seconds' as f) at
        returning id, priority, created_at, started_at, finished_at
      ),
      s as (
        insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input,
          attempts, dispatch_count, due_at, dispatched_at, started_at, finished_at,
          outcome_applied_at, created_at)
        select id, 1, 'only', 'llm', ${TENANT}, priority, 'succeeded', '{}'::jsonb, 1, 1,
          created_at, started_at, started_at, finished_at, finished_at, created_at
        from t
      )
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step,
        created_at)
      select t.id, ${TENANT}, e.seq, e.type, e.from_status, e.to_status, 'only',
        t.created_at
      from t, (values (1, 'create', null, 'queued'), (2, 'start', 'queued', 'running'),
        (3, 'succeed', 'running', 'succeeded')) as e(seq, type, from_status, to_status)`;
    const seconds = (performance.now() - started) / 1_000;
    say(`  inserted finished tasks ${from}–${to} in ${seconds.toFixed(1)} s`);
  }
}

async function vacuumAnalyze(handle: DatabaseHandle): Promise<void> {
  await handle.sql`vacuum analyze tasks, task_steps, task_events, task_timers, dead_letters,
    idempotency_tombstones`;
}

async function tableSizes(handle: DatabaseHandle): Promise<string> {
  const rows = await handle.sql<{ name: string; rows: string; size: string }[]>`
    select c.relname as name, c.reltuples::bigint::text as rows,
      pg_size_pretty(pg_total_relation_size(c.oid)) as size
    from pg_class c
    where c.relname in ('tasks', 'task_steps', 'task_events', 'idempotency_tombstones')
    order by c.relname`;
  return rows.map((r) => `${r.name} ≈${r.rows} rows (${r.size})`).join(', ');
}

function report(label: string, timings: Timings): string {
  const ms = (value: number) => value.toFixed(2).padStart(7);
  return `${label.padEnd(40)} p50 ${ms(timings.p50)} ms  p95 ${ms(timings.p95)} ms  max ${ms(timings.max)} ms  (${timings.claimed} claimed per run)`;
}

async function main(): Promise<void> {
  await using database = await createTestDatabase();
  await migrateDatabase(database.url);
  const handle = openDatabase(database.url, { max: 2, applicationName: 'sluice-bench' });
  try {
    await createTenant(handle.db, { id: TENANT });
    await registerTaskType(handle.db, {
      name: TASK_TYPE,
      version: 1,
      description: 'benchmark type',
      inputSchema: { type: 'object' },
      firstStep: 'only',
      steps: [{ name: 'only', resource: 'llm', timeoutMs: 60_000, maxAttempts: 3 }],
    });
    say(`ready-queue benchmark: ${READY} ready steps, claim batch ${CLAIM_BATCH}, ${RUNS} runs`);
    say(`database ${database.name}`);
    await insertReadyQueue(handle);
    await vacuumAnalyze(handle);
    const results: string[] = [];

    const empty = await timeClaims(handle.db);
    results.push(report('(a) no history', empty));
    say(results.at(-1));

    say(`inserting ${HISTORY} finished tasks (+ steps, events) …`);
    const insertStarted = performance.now();
    await insertHistory(handle);
    await vacuumAnalyze(handle);
    say(`  done in ${((performance.now() - insertStarted) / 1_000).toFixed(1)} s (with vacuum)`);
    say(`  ${await tableSizes(handle)}`);
    const full = await timeClaims(handle.db);
    results.push(report(`(b) ${HISTORY} finished tasks`, full));
    say(results.at(-1));
    const plan = await explainAnalyze(
      handle.db,
      claimReadyStepsStatement(CLAIM_BATCH, undefined, 'all'),
    );

    say(`retention: deleting in batches of ${RETENTION_BATCH} …`);
    const retentionStarted = performance.now();
    let tasks = 0;
    let rows = 0;
    let batches = 0;
    let slowestBatchMs = 0;
    for (;;) {
      const batchStarted = performance.now();
      const deleted = await deleteFinishedTasks(handle.db, {
        finishedBefore: new Date(Date.now() - 7 * DAY_MS),
        tombstoneTtlMs: 30 * DAY_MS,
        limit: RETENTION_BATCH,
      });
      slowestBatchMs = Math.max(slowestBatchMs, performance.now() - batchStarted);
      if (deleted.tasks === 0) break;
      batches++;
      tasks += deleted.tasks;
      rows += deleted.tasks + deleted.steps + deleted.events + deleted.timers + deleted.deadLetters;
      if (batches % 200 === 0) say(`  ${tasks} tasks deleted`);
    }
    const retentionSeconds = (performance.now() - retentionStarted) / 1_000;
    const retentionLine =
      `retention: ${tasks} tasks (${rows} rows, + ${tasks} tombstones) in ${batches} batches, ` +
      `${retentionSeconds.toFixed(1)} s: ${Math.round(tasks / retentionSeconds)} tasks/s, ` +
      `${Math.round(rows / retentionSeconds)} rows/s; slowest batch ${slowestBatchMs.toFixed(0)} ms`;
    say(retentionLine);

    const after = await timeClaims(handle.db);
    results.push(report('(c) after retention, before vacuum', after));
    say(results.at(-1));
    await vacuumAnalyze(handle);
    const vacuumed = await timeClaims(handle.db);
    results.push(report('(d) after retention and vacuum', vacuumed));
    say(results.at(-1));
    say(`  ${await tableSizes(handle)}`);

    say();
    say('summary');
    for (const line of results) say(`  ${line}`);
    say(`  ${retentionLine}`);
    say();
    say(`EXPLAIN (ANALYZE, BUFFERS) of the claim with ${HISTORY} finished tasks present:`);
    for (const line of plan) say(`  ${line}`);
  } finally {
    await handle.close();
  }
}

await main();

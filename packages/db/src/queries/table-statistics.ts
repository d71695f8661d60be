/**
 * Planner statistics of the queue tables while they are young.
 *
 * Sluice prepares its statements (client.ts), and Postgres keeps the generic plan it makes for a
 * prepared statement until something invalidates it — an `ANALYZE` of a table it reads, not the
 * table's growth. A statement first planned on an empty `tasks` table looks its tasks up by
 * reading the whole table (the cheapest plan for a few pages), and goes on doing so as the table
 * grows to thousands of rows: seen in `auto_explain` on the group start, the group commit, the
 * claim and the outcome pass of every benchmark run on a new database, each reading every task
 * and step. Autovacuum analyzes a table once 10 % of it changed, but visits a database at most
 * once a minute (`autovacuum_naptime`), so a new deployment runs on such plans for its first
 * minute or more. Analyzing a queue table as soon as its contents changed by as many rows as it
 * held at its last analysis (a doubling while it grows; rarer than autovacuum once it is large)
 * lets those plans be made again for the table's real size.
 */
import { sql } from 'drizzle-orm';
import type { Database, Executor } from '../client.js';
import { textArrayOf } from './batch-input.js';

/** The tables of the hot path, whose plans a young deployment's growth leaves behind. */
export const QUEUE_TABLES = ['tasks', 'task_steps', 'task_events'] as const;
export type QueueTable = (typeof QUEUE_TABLES)[number];

/** Fewer changed rows than this never call for an analysis: small tables plan well enough. */
export const MIN_CHANGES_FOR_ANALYZE = 1_000;

/** Keys of the advisory lock one analyzing session holds (the first says "statistics"). */
const ANALYZE_LOCK = { namespace: 0x73746174, key: 1 } as const;

/**
 * The queue tables whose rows changed (inserted, updated or deleted) since their last analysis by
 * at least as many as they held then, and by at least `minChanges`. Reads the cumulative
 * statistics, which backends report within about a second of committing.
 */
export async function queueTablesDueForAnalyze(
  executor: Executor,
  minChanges = MIN_CHANGES_FOR_ANALYZE,
): Promise<QueueTable[]> {
  const rows = await executor.execute<{ table: QueueTable }>(sql`
    select s.relname as table
    from pg_stat_user_tables s
    join pg_class c on c.oid = s.relid
    where s.schemaname = current_schema()
      and s.relname = any(${textArrayOf(QUEUE_TABLES)})
      and s.n_mod_since_analyze >= greatest(${minChanges}::float8, c.reltuples)
    order by s.relname`);
  return rows.map((row) => row.table);
}

/**
 * Analyzes `tables` unless another session is analyzing them now (then it returns false at once:
 * one analysis serves every replica).
 */
export async function analyzeQueueTables(
  db: Database,
  tables: readonly QueueTable[],
): Promise<boolean> {
  const known = tables.filter((table) => (QUEUE_TABLES as readonly string[]).includes(table));
  if (known.length === 0) return false;
  return db.transaction(async (tx) => {
    const [row] = await tx.execute<{ locked: boolean }>(
      sql`select pg_try_advisory_xact_lock(${ANALYZE_LOCK.namespace}, ${ANALYZE_LOCK.key}) as locked`,
    );
    if (row?.locked !== true) return false;
    // The names are the constants above, never input.
    await tx.execute(sql.raw(`analyze ${known.map((table) => `"${table}"`).join(', ')}`));
    return true;
  });
}

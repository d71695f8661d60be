/**
 * What Postgres holds about the demo's tasks beyond what the API shows: the rows of their steps,
 * and the rows the `document-ingestion` sample wrote to its own table.
 */
import type { DatabaseHandle } from '@sluice/db';
import type { StepSummary } from './summary.js';

/** The table the `document-ingestion` sample writes to (created by its first write). */
const INGESTED_ROWS = 'sluice_samples.ingested_rows';

/** The step rows of the tenant's tasks, by task id, in step order. */
export async function stepsOf(
  database: DatabaseHandle,
  tenant: string,
): Promise<Map<string, StepSummary[]>> {
  const rows = await database.sql<{ task_id: string; name: string; status: string }[]>`
    select task_id, name, status from task_steps where tenant_id = ${tenant} order by task_id, seq`;
  const byTask = new Map<string, StepSummary[]>();
  for (const { task_id: taskId, name, status } of rows) {
    const steps = byTask.get(taskId) ?? [];
    steps.push({ name, status });
    byTask.set(taskId, steps);
  }
  return byTask;
}

/**
 * How many rows each of `taskIds` has in `sluice_samples.ingested_rows` (tasks without rows are
 * left out; so is everything while the table does not exist yet).
 */
export async function ingestedRowsOf(
  database: DatabaseHandle,
  taskIds: readonly string[],
): Promise<Map<string, number>> {
  const [table] = await database.sql<{ exists: boolean }[]>`
    select to_regclass(${INGESTED_ROWS}) is not null as exists`;
  if (!table?.exists || taskIds.length === 0) return new Map();
  const rows = await database.sql<{ task_id: string; count: number }[]>`
    select task_id::text, count(*)::int as count from sluice_samples.ingested_rows
    where task_id = any(${taskIds}::uuid[])
    group by task_id`;
  return new Map(rows.map((row): [string, number] => [row.task_id, row.count]));
}

/**
 * A step's latest activity — its dispatch, start or finish, whichever came last — as
 * `task_steps_activity_idx` indexes it (with `priority` before it). The readers of recent windows
 * bound their reads with it; Postgres uses the index only for this very expression, so they all
 * take it from here (schema.ts spells the index's own copy).
 */
import { sql, type SQL } from 'drizzle-orm';

/** The expression over `task_steps` read as `alias` (none: unqualified). */
export function latestStepActivity(alias?: 's'): SQL {
  const column = (name: string) => (alias === undefined ? name : `${alias}.${name}`);
  return sql.raw(
    `greatest(${column('dispatched_at')}, ${column('started_at')}, ${column('finished_at')})`,
  );
}

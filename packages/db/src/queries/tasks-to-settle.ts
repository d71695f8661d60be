/**
 * Tasks the scheduler settles once nothing of theirs is in flight: a requested cancel or pause, a
 * task whose only work left waits out a retry backoff, an approval to ask again after a retry.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { literalLimit } from './batch-input.js';

/** A task whose requested cancel or pause, or re-asked approval, can now be settled. */
export interface TaskToSettle {
  readonly taskId: string;
}

/**
 * Locks up to `limit` tasks the scheduler must settle because nothing of theirs is in flight any
 * more: running tasks with a requested cancel or pause, running tasks whose only work left is a
 * fan-out branch waiting out its retry backoff, and queued tasks (after a retry) whose only
 * pending work is an approval to ask again. Skips tasks another replica holds.
 */
export async function lockTasksToSettle(
  executor: Executor,
  limit: number,
): Promise<TaskToSettle[]> {
  const rows = await executor.execute<{ id: string }>(sql`
    ${tasksToSettle(limit)}
    for update of t skip locked
  `);
  return rows.map((row) => ({ taskId: row.id }));
}

/**
 * Whether any task waits to be settled ({@link lockTasksToSettle}), without a transaction: most
 * passes find none, and answering that in one statement saves them a `begin` and a `commit`.
 *
 * `appliedNow`: steps whose outcomes the caller's transaction marks applied in the same round trip
 * (the outcome pass asks within its transaction): they count as applied whether or not the marks
 * ran before this statement.
 */
export async function hasTasksToSettle(
  executor: Executor,
  appliedNow: readonly number[] = [],
): Promise<boolean> {
  const [row] = await executor.execute<{ found: boolean }>(
    sql`select exists (${tasksToSettle(1, appliedNow)}) as found`,
  );
  return row?.found === true;
}

/** The tasks to settle, oldest change first (see {@link lockTasksToSettle}). */
function tasksToSettle(limit: number, appliedNow: readonly number[] = []): SQL {
  // One statement text whatever the ids and limit, so each connection plans it a few times rather
  // than at nearly every outcome pass (~1.4 ms a plan; issue 7, pg_stat_statements). The ids only
  // filter steps already found through the task, so an array (whatever its estimate) plans alike.
  const notAppliedNow =
    appliedNow.length === 0
      ? sql``
      : sql` and s.id <> all(array(select jsonb_array_elements_text(${JSON.stringify(appliedNow)}::jsonb)::bigint))`;
  // The candidates come from three small partial indexes (migration 0008); the conditions below
  // then decide. Without them every pass read the whole tasks table — the backlog and the
  // finished history — once per batch of outcomes (issue 7 profile).
  return sql`
    select t.id from tasks t
    where t.id in (
        select c.id from tasks c
        where c.status = 'running' and (c.cancel_requested or c.pause_requested)
        union all
        select c.id from tasks c where c.status = 'queued' and c.approval is not null
        union all
        select w.task_id from task_steps w where w.status = 'ready' and w.due_at > now()
      )
      and (
        (t.status = 'running' and (t.cancel_requested or t.pause_requested))
        or (t.status = 'queued' and t.approval is not null
            and not exists (select 1 from task_steps r where r.task_id = t.id and r.status = 'ready'))
        or (t.status = 'running'
            and exists (select 1 from task_steps w
                        where w.task_id = t.id and w.status = 'ready' and w.due_at > now())
            and not exists (select 1 from task_steps r
                            where r.task_id = t.id and r.status = 'ready' and r.due_at <= now()))
      )
      and not exists (
        select 1 from task_steps s
        where s.task_id = t.id
          and (s.status in ('dispatched', 'running')
               or (s.outcome is not null and s.outcome_applied_at is null${notAppliedNow}))
      )
    order by t.updated_at
    limit ${literalLimit(limit)}`;
}

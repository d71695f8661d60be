/**
 * Where a queued task stands in the ready queue, and how fast its priority is being admitted:
 * what `GetTask` turns into an estimated wait.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { latestStepActivity } from './step-activity.js';

/** How far back admissions are counted for the rate. */
export const ADMISSION_RATE_WINDOW_MS = 5 * 60 * 1_000;

/** A task's place in the ready queue. */
export interface QueueStanding {
  /** The resource of the task's next step (what a breaker or a limit keeps it from). */
  readonly resource: string;
  /**
   * Ready, due steps of its resource admitted before the task's next step (more urgent, or older of
   * its priority).
   */
  readonly ahead: number;
  /** Steps of the task's priority and resource dispatched within {@link ADMISSION_RATE_WINDOW_MS}. */
  readonly admittedRecently: number;
}

/** The standing of the task's earliest ready step, or `undefined` when it has none. */
export async function queueStanding(
  executor: Executor,
  taskId: string,
): Promise<QueueStanding | undefined> {
  const since = sql`now() - make_interval(secs => ${ADMISSION_RATE_WINDOW_MS / 1_000})`;
  const rows = await executor.execute<{ resource: string; ahead: number; admitted: number }>(sql`
    with mine as (
      select priority, due_at, id, resource from task_steps
      where task_id = ${taskId} and status = 'ready'
      order by due_at, id limit 1
    )
    select mine.resource,
      -- Admission is per resource (its own limit): steps of another resource are never admitted
      -- in this one's place, nor do their admissions say how fast this one's are.
      (select count(*)::int from task_steps s
        where s.status = 'ready' and s.due_at <= now() and s.resource = mine.resource
          and (s.priority < mine.priority
               or (s.priority = mine.priority and (s.due_at, s.id) < (mine.due_at, mine.id)))
      ) as ahead,
      (select count(*)::int from task_steps s
        where s.priority = mine.priority and s.resource = mine.resource
          -- A range of the activity index (a step dispatched since then was active since then),
          -- then the dispatches themselves.
          and ${latestStepActivity('s')} > ${since}
          and s.dispatched_at > ${since}
      ) as admitted
    from mine
  `);
  const row = rows[0];
  return row
    ? { resource: row.resource, ahead: row.ahead, admittedRecently: row.admitted }
    : undefined;
}

/**
 * The estimated wait in milliseconds: the steps ahead (and this one) divided by the recent
 * admission rate; `undefined` when nothing of that priority was admitted lately (no basis).
 */
export function estimateWaitMs(
  standing: Pick<QueueStanding, 'ahead' | 'admittedRecently'>,
): number | undefined {
  if (standing.admittedRecently === 0) return undefined;
  const perMs = standing.admittedRecently / ADMISSION_RATE_WINDOW_MS;
  return Math.round((standing.ahead + 1) / perMs);
}

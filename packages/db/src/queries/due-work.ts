/**
 * When work that is known but not yet due falls due: the next open timer, the next ready step held
 * back by its due time (a retry's backoff). The scheduler's loops sleep until then while there is
 * nothing else to do, instead of looking every poll interval (services/scheduler/src/batch-loop.ts).
 *
 * Both answer in milliseconds from Postgres's `now()`, the clock the due times are compared with
 * when the work is taken: a caller whose clock runs ahead cannot wake before the work is due, find
 * nothing, and wake again at once.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../client.js';

/**
 * Milliseconds until the earliest open timer is due (0 or less: one is due now), or `undefined`
 * when no timer is open. One probe of `task_timers_due_idx`.
 */
export async function msUntilNextTimer(executor: Executor): Promise<number | undefined> {
  const rows = await executor.execute<{ ms: number | null }>(sql`
    select ceil(extract(epoch from min(due_at) - now()) * 1000)::float8 as ms
    from task_timers where done_at is null
  `);
  return rows[0]?.ms ?? undefined;
}

/**
 * Milliseconds until the earliest ready step that is not due yet becomes due, or `undefined` when
 * every ready step is due (or none is ready). One probe of `task_steps_ready_due_idx`, from now on:
 * steps due already are not read.
 */
export async function msUntilNextReadyStep(executor: Executor): Promise<number | undefined> {
  const rows = await executor.execute<{ ms: number | null }>(sql`
    select ceil(extract(epoch from min(due_at) - now()) * 1000)::float8 as ms
    from task_steps where status = 'ready' and due_at > now()
  `);
  return rows[0]?.ms ?? undefined;
}

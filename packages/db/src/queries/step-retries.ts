/**
 * Step retries: a failed step put back into the ready queue to wait out its backoff, and what a
 * task waiting for such a retry shows (which step, when, after which failure).
 */
import { and, eq, sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { taskSteps } from '../schema.js';

/**
 * Schedules a failed step to run again: back into the ready queue, due at `dueAt` (the due time is
 * the durable timer: no executor holds the step meanwhile). The same row keeps its sequence — so its
 * idempotency key — and its attempt count; the next dispatch gets a new number. The failure stays
 * in the task's events and error.
 */
export async function scheduleStepRetry(
  executor: Executor,
  stepId: number,
  dueAt: Date,
): Promise<void> {
  await executor
    .update(taskSteps)
    .set({ status: 'ready', dueAt, outcome: null, finishedAt: null })
    .where(and(eq(taskSteps.id, stepId), eq(taskSteps.status, 'failed')));
}

/** Whether any step of the task other than `stepId` is in flight or ready to run now. */
export async function hasOtherActiveSteps(
  executor: Executor,
  taskId: string,
  stepId: number,
): Promise<boolean> {
  const rows = await executor.execute<{ active: boolean }>(sql`
    select exists (
      select 1 from task_steps
      where task_id = ${taskId} and id <> ${stepId}
        and (status in ('dispatched', 'running') or (status = 'ready' and due_at <= now()))
    ) as active
  `);
  return rows[0]?.active === true;
}

/** The retry a running task waits for when nothing else of it is left to run. */
export interface WaitingRetry {
  readonly step: string;
  readonly dueAt: Date;
  /** Its backoff has ended (by Postgres's clock): it waits for admission, not for its due time. */
  readonly dueNow: boolean;
  /** The failure the retry answers, from the step's latest `step_retry_scheduled` fact. */
  readonly errorClass: string;
  readonly message: string;
}

/**
 * The step that is due next among the task's waiting retries, with the failure that made it wait;
 * undefined when none waits (or its failure was not recorded as a scheduled retry).
 */
export async function waitingRetry(
  executor: Executor,
  taskId: string,
): Promise<WaitingRetry | undefined> {
  const rows = await executor.execute<{
    name: string;
    due_at: Date | string;
    due_now: boolean;
    error_class: string | null;
    message: string | null;
  }>(sql`
    select s.name, s.due_at, s.due_at <= now() as due_now,
      e.data->>'error_class' as error_class, e.data->>'message' as message
    from task_steps s
    left join lateral (
      select data from task_events
      where task_id = s.task_id and type = 'step_retry_scheduled' and step = s.name
      order by seq desc limit 1
    ) e on true
    where s.task_id = ${taskId} and s.status = 'ready'
    order by s.due_at
    limit 1
  `);
  const row = rows[0];
  if (!row || row.error_class === null) return undefined;
  return {
    step: row.name,
    dueAt: new Date(row.due_at),
    dueNow: row.due_now,
    errorClass: row.error_class,
    message: row.message ?? '',
  };
}

/** When the task's next waiting step is due (a retry after its backoff), if one waits. */
export async function nextAttemptAt(executor: Executor, taskId: string): Promise<Date | undefined> {
  const [row] = await executor
    .select({ dueAt: sql<Date | null>`min(${taskSteps.dueAt})` })
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.status, 'ready')));
  return row?.dueAt ? new Date(row.dueAt) : undefined;
}

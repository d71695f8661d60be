/**
 * The reconciler's queries: steps that should be in flight and may not be (claimed but never
 * published, or dispatched/running with no recent sign of life), putting such a step back into the
 * ready queue, and failing one that was dispatched too often.
 *
 * Every write is conditional on the status and dispatch number the reconciler saw, and on the task
 * still being queued or running with no cancel or pause requested: a step that started, finished or
 * was dispatched again meanwhile — or whose task the settler owns — is left alone.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { SerializedStepError, StepOutcome } from '@sluice/core';
import type { Executor } from '../client.js';
import { appendTaskEvent } from './events.js';
import { lockTask } from './tasks.js';

/** Why a step is a candidate for reconciliation. */
export type StaleStepKind =
  /** Dispatched, no publish sequence recorded, and claimed longer ago than the grace period. */
  | 'unpublished'
  /** Dispatched or running with no heartbeat (or dispatch) for longer than the stale threshold. */
  | 'silent';

/** A step that may have been lost; `silent` ones are lost only if their message is gone too. */
export interface StaleStep {
  readonly id: number;
  readonly taskId: string;
  readonly seq: number;
  readonly status: 'dispatched' | 'running';
  /** The dispatch number the reconciler saw (the latest claim's). */
  readonly dispatch: number;
  /** The stream sequence recorded for the step's latest publication, if any. */
  readonly publishSeq: number | null;
  readonly kind: StaleStepKind;
}

/** What {@link findStaleSteps} looks for. */
export interface FindStaleStepsOptions {
  /** A claim without a recorded publish sequence older than this was never published. */
  readonly graceMs: number;
  /** A step with no heartbeat (or, never started, no dispatch) for this long shows no sign of life. */
  readonly staleMs: number;
  /** Only steps with an id above this (a cursor, so a long backlog is scanned page by page). */
  readonly afterId: number;
  readonly limit: number;
}

/**
 * The condition "the step's task is one the reconciler may touch". A task with a requested cancel
 * or pause counts: the settler completes those only once nothing is in flight, so a lost step of
 * theirs must be given back too — to the ready queue, where the claim leaves it alone while the
 * request stands (a cancel then cancels it, a resume dispatches it).
 */
function taskIsActive(stepAlias: SQL): SQL {
  return sql`exists (
    select 1 from tasks t
    where t.id = ${stepAlias}.task_id
      and t.status in ('queued', 'running')
  )`;
}

/**
 * Finds up to `limit` steps, in id order after `afterId`, that should be in flight and show no
 * sign of it by Postgres alone. A `silent` step is still in flight when its message is in the
 * steps stream (JetStream will redeliver it); the caller checks that.
 */
export async function findStaleSteps(
  executor: Executor,
  options: FindStaleStepsOptions,
): Promise<StaleStep[]> {
  const grace = sql`make_interval(secs => ${options.graceMs / 1_000})`;
  const stale = sql`make_interval(secs => ${options.staleMs / 1_000})`;
  const rows = await executor.execute<{
    id: string;
    task_id: string;
    seq: number;
    status: 'dispatched' | 'running';
    dispatch_count: number;
    publish_seq: string | null;
    unpublished: boolean;
  }>(sql`
    select s.id, s.task_id, s.seq, s.status, s.dispatch_count, s.publish_seq,
      (s.status = 'dispatched' and s.publish_seq is null) as unpublished
    from task_steps s
    where s.id > ${options.afterId}
      and (
        (s.status = 'dispatched' and s.publish_seq is null and s.dispatched_at < now() - ${grace})
        -- A dispatched step's sign of life is its dispatch: a heartbeat it has is from an earlier
        -- run (before a retry's backoff or a requeue), which says nothing about this dispatch.
        or (s.status = 'dispatched' and s.dispatched_at < now() - ${stale})
        or (s.status = 'running'
            and coalesce(s.heartbeat_at, s.dispatched_at) < now() - ${stale})
      )
      and ${taskIsActive(sql.raw('s'))}
    order by s.id
    limit ${options.limit}
  `);
  return rows.map((row) => ({
    id: Number(row.id),
    taskId: row.task_id,
    seq: row.seq,
    status: row.status,
    dispatch: row.dispatch_count,
    publishSeq: row.publish_seq === null ? null : Number(row.publish_seq),
    kind: row.unpublished ? 'unpublished' : 'silent',
  }));
}

/** The step and the state the reconciler saw it in. */
export type SeenStep = Pick<StaleStep, 'id' | 'taskId' | 'seq' | 'status' | 'dispatch'>;

/** The condition "the step is still as the reconciler saw it, and its task still active". */
function stillAsSeen(step: SeenStep): SQL {
  return sql`s.id = ${step.id} and s.status = ${step.status} and s.dispatch_count = ${step.dispatch}
    and ${taskIsActive(sql.raw('s'))}`;
}

/**
 * Puts a lost step back into the ready queue, due now, so the normal claim dispatches it again
 * under a new dispatch number (neither the stream's duplicate window nor a leftover message id can
 * swallow it). The old publish sequence is cleared: it names a message of an older dispatch.
 * Returns false when the step changed since it was seen (it started, finished, or was dispatched
 * again) or its task is no longer the reconciler's to touch.
 *
 * Call it in a transaction: the step's update and its event (which takes the task's next event
 * sequence) must commit together, or a crash between them leaves a gap in the task's history.
 */
export async function requeueLostStep(executor: Executor, step: SeenStep): Promise<boolean> {
  // The task row first: the lock order of every writer (task, then its steps), so that an executor
  // starting this very step cannot deadlock with us.
  await lockTask(executor, step.taskId);
  const rows = await executor.execute<{ name: string }>(sql`
    update task_steps s
    set status = 'ready', due_at = now(), publish_seq = null
    where ${stillAsSeen(step)}
    returning s.name
  `);
  const row = rows[0];
  if (!row) return false;
  await appendTaskEvent(executor, {
    taskId: step.taskId,
    type: 'step_redispatched',
    step: row.name,
    data: { seq: step.seq, lost_dispatch: step.dispatch },
  });
  return true;
}

/**
 * Records a failed outcome for a lost step that may not be dispatched again (its dispatches reached
 * the cap), as an executor records one, so the scheduler's outcome path fails the task. Returns
 * false when the step changed since it was seen or its task is no longer the reconciler's. Call it
 * in a transaction, as {@link requeueLostStep}.
 */
export async function failLostStep(
  executor: Executor,
  step: SeenStep,
  error: SerializedStepError,
): Promise<boolean> {
  await lockTask(executor, step.taskId);
  const outcome: StepOutcome = { type: 'failed', error };
  const rows = await executor.execute<{ name: string }>(sql`
    update task_steps s
    set status = 'failed', outcome = ${JSON.stringify(outcome)}::jsonb,
      outcome_applied_at = null, finished_at = now()
    where ${stillAsSeen(step)}
    returning s.name
  `);
  const row = rows[0];
  if (!row) return false;
  await appendTaskEvent(executor, {
    taskId: step.taskId,
    type: 'step_failed',
    step: row.name,
    data: { seq: step.seq, error: error.message },
  });
  return true;
}

/**
 * Fail-fast while a circuit breaker is open (issue 5). The claim leaves the ready steps of a
 * resource whose breaker is open in the queue, where they wait; a step that declares
 * `whileBreakerOpen: 'fail'` would rather fail: the scheduler fails it at once as retryable, without
 * dispatching it, and the outcome applier retries it by class and attempts like any failure.
 *
 * The failure goes through the rows and events an executor's failure does: the step gets a new
 * dispatch number (so any older message of it is stale), is started (attempt + 1 — a fast failure
 * spends an attempt, which is what makes the task end once they run out) and its failed outcome is
 * recorded (`step_failed`); a queued task starts first, since outcomes are applied to running
 * tasks only. Nothing is published and no executor takes part, so no call reaches the tool and
 * nothing is reported to the governor: the breaker never counts these failures.
 */
import { sql } from 'drizzle-orm';
import type { SerializedStepError } from '@sluice/core';
import type { Executor, Transaction } from '../client.js';
import { applyTransition } from '../transition.js';
import { recordStepOutcome } from './step-outcomes.js';
import { lockTask } from './tasks.js';

/** A ready step to fail fast: its resource's breaker is open and it declares `fail`. */
export interface FailFastStep {
  readonly stepId: number;
  readonly taskId: string;
  readonly seq: number;
  readonly name: string;
  readonly resource: string;
  /**
   * Time left of the breaker's cool-down (from the governor's `breakers` row), when it is open
   * with one still running: the retry is not due before the breaker may probe again. Absent for a
   * breaker forced open by an override (it has no cool-down): the step's backoff alone decides.
   */
  readonly retryAfterMs?: number;
}

/** The error a step fails fast with. */
export function breakerOpenError(resource: string, retryAfterMs?: number): SerializedStepError {
  return {
    errorClass: 'external_5xx',
    message: `circuit breaker of ${resource} is open`,
    retryable: true,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  };
}

/**
 * Up to `limit` ready, due steps of the given resources (those with open breakers) whose task is
 * queued or running, neither cancelling nor pausing, and whose declaration in the task's pinned
 * manifest says `whileBreakerOpen: 'fail'` (a step without the field waits), most urgent first.
 * Not while the governor's `breakers` row is open with its cool-down over: the breaker is about to
 * go half-open (the decision says so at the governor's next tick), and a step failed then would
 * retry after its backoff alone, fail fast again and spend its attempts before any probe ran.
 * Reads without locking: {@link failStepWhileBreakerOpen} locks and checks each again.
 */
export async function findFailFastSteps(
  executor: Executor,
  resources: readonly string[],
  limit: number,
): Promise<FailFastStep[]> {
  if (resources.length === 0 || limit <= 0) return [];
  const rows = await executor.execute<{
    id: string;
    task_id: string;
    seq: number;
    name: string;
    resource: string;
    retry_after_ms: number | null;
  }>(sql`
    select s.id, s.task_id, s.seq, s.name, s.resource,
      case when b.status = 'open' and b.cool_down_until > now()
        then least(ceil(extract(epoch from b.cool_down_until - now()) * 1000), 2147483647)::int
      end as retry_after_ms
    from task_steps s
    join tasks t on t.id = s.task_id
    join task_types tt on tt.name = t.type and tt.version = t.type_version
    left join breakers b on b.resource = s.resource
    where s.status = 'ready'
      and s.due_at <= now()
      and s.resource in (${sql.join(
        resources.map((resource) => sql`${resource}`),
        sql`, `,
      )})
      and t.status in ('queued', 'running')
      and not t.cancel_requested
      and not t.pause_requested
      -- Its cool-down over, the breaker goes half-open at the governor's next tick: the step
      -- waits for that (a probe), rather than spend its attempts failing fast meanwhile.
      and not coalesce(b.status = 'open' and b.cool_down_until <= now(), false)
      and exists (
        select 1 from jsonb_array_elements(tt.steps) d
        where d ->> 'name' = s.name and d ->> 'whileBreakerOpen' = 'fail'
      )
    order by s.priority, s.due_at, s.id
    limit ${limit}
  `);
  return rows.map((row) => ({
    stepId: Number(row.id),
    taskId: row.task_id,
    seq: row.seq,
    name: row.name,
    resource: row.resource,
    ...(row.retry_after_ms === null ? {} : { retryAfterMs: row.retry_after_ms }),
  }));
}

/**
 * Fails one step found by {@link findFailFastSteps} as retryable without running it (see the
 * module comment). Locks the task first (the lock order of every writer: task row, then its step
 * rows), then the step with `SKIP LOCKED`, and checks both again: returns false, changing nothing,
 * when the task may no longer start a step or the step is no longer ready and due (claimed,
 * cancelled, or taken by another scheduler meanwhile). Run it in a transaction.
 */
export async function failStepWhileBreakerOpen(
  executor: Transaction,
  step: FailFastStep,
): Promise<boolean> {
  const task = await lockTask(executor, step.taskId);
  if (
    !task ||
    !(task.status === 'queued' || task.status === 'running') ||
    task.cancelRequested ||
    task.pauseRequested
  ) {
    return false;
  }
  const claimed = await executor.execute<{ dispatch_count: number; attempts: number }>(sql`
    with claimable as (
      select id from task_steps
      where id = ${step.stepId} and status = 'ready' and due_at <= now()
      for update skip locked
    )
    update task_steps s
    set status = 'running', dispatch_count = s.dispatch_count + 1, attempts = s.attempts + 1,
      dispatched_at = now(), started_at = now(), heartbeat_at = now()
    from claimable
    where s.id = claimable.id
    returning s.dispatch_count, s.attempts
  `);
  const row = claimed[0];
  if (!row) return false;
  if (task.status === 'queued') {
    const started = await applyTransition(executor, {
      taskId: task.id,
      event: { type: 'start' },
      step: step.name,
      patch: { currentStep: step.name },
      data: { seq: step.seq, attempt: row.attempts, breaker_open: step.resource },
    });
    if (!started.ok) throw new Error(`cannot start task ${task.id}: ${started.reason}`);
  }
  const recorded = await recordStepOutcome(
    executor,
    { taskId: step.taskId, seq: step.seq, dispatch: row.dispatch_count },
    { type: 'failed', error: breakerOpenError(step.resource, step.retryAfterMs) },
  );
  if (!recorded) throw new Error(`could not record the fast failure of step ${step.stepId}`);
  return true;
}

/**
 * The scheduler's part of each task's trace. What it does to a task — apply a step's outcome, fire
 * a timer, settle a cancel or pause — is a short span continued from the `traceparent` stored on the
 * task row, so it lands in the task's trace however long after `CreateTask` it happens (an approval
 * that waits hours still adds to the same trace id). Each state change it makes is a span event
 * ({@link EVENT_TASK_TRANSITION}) on that span, and each retry it schedules another
 * ({@link EVENT_STEP_RETRY_SCHEDULED}), so Jaeger shows the task's history on its timeline.
 *
 * The work runs inside a Postgres transaction; an event recorded in one that then rolls back tells
 * of a change that did not happen. That is rare (a lost connection) and the span says so then:
 * it ends with the error.
 */
import type { TaskRecord, TransitionRequest, TransitionResult } from '@sluice/db';
import {
  ATTR_ERROR_TYPE,
  ATTR_RETRY_NEXT_ATTEMPT_AT,
  ATTR_STEP,
  ATTR_STEP_ATTEMPT,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_FROM,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_STEP_RETRY_SCHEDULED,
  EVENT_TASK_TRANSITION,
  activeSpan,
  tracerFor,
  withContinuedSpan,
  type Attributes,
  type Span,
} from '@sluice/telemetry';

/** The instrumentation scope of the scheduler's spans. */
export const SCHEDULER_TRACER = '@sluice/scheduler';

/** Applying one recorded step outcome (outcome-applier.ts). */
export const SPAN_APPLY_OUTCOME = 'sluice.scheduler.apply_outcome';
/** Firing one durable timer: a retry backoff or an approval timeout (timer-firer.ts). */
export const SPAN_FIRE_TIMER = 'sluice.scheduler.fire_timer';
/** Settling a task once nothing of it runs: cancelled, paused, waiting for a retry (settler.ts). */
export const SPAN_SETTLE = 'sluice.scheduler.settle';

/** The kind of outcome a {@link SPAN_APPLY_OUTCOME} span applies, e.g. `failed`, `next`. */
export const ATTR_OUTCOME_TYPE = 'sluice.outcome.type';
/** The kind of timer a {@link SPAN_FIRE_TIMER} span fires, e.g. `retry_backoff`. */
export const ATTR_TIMER_KIND = 'sluice.timer.kind';
/** How long the retry budget pushed a retry later, in ms (on the retry event). */
export const ATTR_RETRY_BUDGET_DEFERRED_MS = 'sluice.retry.budget_deferred_ms';

/** The task fields a span in its trace needs. */
export type TracedTask = Pick<TaskRecord, 'id' | 'tenantId' | 'type' | 'traceParent'>;

/**
 * Runs `fn` in a span named `name`, a child of the task's stored traceparent (a new trace when the
 * task has none). The span is active for `fn`, so {@link recordTransition} and
 * {@link recordRetryScheduled} add to it.
 */
export function inTaskTrace<T>(
  task: TracedTask,
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return withContinuedSpan(
    tracerFor(SCHEDULER_TRACER),
    task.traceParent,
    name,
    {
      attributes: {
        [ATTR_TASK_ID]: task.id,
        [ATTR_TENANT]: task.tenantId,
        [ATTR_TASK_TYPE]: task.type,
        ...attributes,
      },
    },
    fn,
  );
}

/**
 * Records an applied transition as an event on the active span: the table's event, the status
 * before and after, the step it is about and, for a failure, the error class. A refused one records
 * nothing (the caller logs it).
 */
export function recordTransition(request: TransitionRequest, result: TransitionResult): void {
  if (!result.ok) return;
  const error = request.patch?.error;
  activeSpan()?.addEvent(EVENT_TASK_TRANSITION, {
    [ATTR_TASK_EVENT]: request.event.type,
    ...(result.from.status === null ? {} : { [ATTR_TASK_STATUS_FROM]: result.from.status }),
    ...(result.to.status === null ? {} : { [ATTR_TASK_STATUS_TO]: result.to.status }),
    ...(request.step ? { [ATTR_STEP]: request.step } : {}),
    ...(error ? { [ATTR_ERROR_TYPE]: error.errorClass } : {}),
  });
}

/** What {@link recordRetryScheduled} records. */
export interface ScheduledRetry {
  readonly step: string;
  /** The attempt that failed (1 for the first). */
  readonly attempt: number;
  readonly errorClass: string;
  readonly nextAttemptAt: Date;
  readonly deferredMs: number;
}

/** Records a scheduled retry as an event on the active span. */
export function recordRetryScheduled(retry: ScheduledRetry): void {
  activeSpan()?.addEvent(EVENT_STEP_RETRY_SCHEDULED, {
    [ATTR_STEP]: retry.step,
    [ATTR_STEP_ATTEMPT]: retry.attempt,
    [ATTR_ERROR_TYPE]: retry.errorClass,
    [ATTR_RETRY_NEXT_ATTEMPT_AT]: retry.nextAttemptAt.toISOString(),
    ...(retry.deferredMs > 0 ? { [ATTR_RETRY_BUDGET_DEFERRED_MS]: retry.deferredMs } : {}),
  });
}

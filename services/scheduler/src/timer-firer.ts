/**
 * Fires due durable timers (`task_timers`) of the kinds the scheduler owns. Each fires once: it is
 * locked with SKIP LOCKED, acted on and closed in one transaction. A timer that changes its task
 * does so in a `sluice.scheduler.fire_timer` span of the task's trace (task-trace.ts).
 */
import {
  TimerKind,
  applyTransition,
  lockDueTimers,
  lockTask,
  markTimersDone,
  msUntilNextTimer,
  type Database,
  type TimerRecord,
  type Transaction,
  type TransitionRequest,
} from '@sluice/db';
import type { Logger } from '@sluice/telemetry';
import type { BatchReport } from './batch-loop.js';
import { ATTR_TIMER_KIND, SPAN_FIRE_TIMER, inTaskTrace, recordTransition } from './task-trace.js';

/** What the timer firer needs. */
export interface TimerFirerDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly batchSize: number;
  /** Called after a commit that made tasks queued again (their steps are due). */
  readonly onStepsReady: () => void;
}

/**
 * Fires one batch of due timers. When none is due it says so without a transaction, and when the
 * next one falls due (batch-loop.ts sleeps until then).
 */
export async function fireTimerBatch(deps: TimerFirerDeps): Promise<BatchReport> {
  const dueInMs = await msUntilNextTimer(deps.db);
  if (dueInMs === undefined || dueInMs > 0) {
    return { more: false, handled: 0, idle: true, ...(dueInMs === undefined ? {} : { dueInMs }) };
  }
  const { count, requeued } = await deps.db.transaction(async (tx) => {
    const due = await lockDueTimers(tx, deps.batchSize);
    let requeuedAny = false;
    for (const timer of due) requeuedAny = (await fire(tx, timer, deps.log)) || requeuedAny;
    await markTimersDone(
      tx,
      due.map((timer) => timer.id),
    );
    return { count: due.length, requeued: requeuedAny };
  });
  if (requeued) deps.onStepsReady();
  // None locked: another scheduler holds the due ones; it fires them.
  return { more: count === deps.batchSize, handled: count, idle: count === 0 };
}

/** Fires one timer; returns true when it made a task queued again. */
async function fire(tx: Transaction, timer: TimerRecord, log: Logger): Promise<boolean> {
  switch (timer.kind) {
    case TimerKind.RetryBackoff: {
      const task = await lockTask(tx, timer.taskId);
      // Moot when the task was cancelled (or otherwise moved on) while it waited.
      if (!task || task.status !== 'failed_retryable') return false;
      return inTaskTrace(
        task,
        SPAN_FIRE_TIMER,
        { [ATTR_TIMER_KIND]: 'retry_backoff' },
        async () => {
          const request: TransitionRequest = { taskId: task.id, event: { type: 'backoff_due' } };
          const result = await applyTransition(tx, request);
          recordTransition(request, result);
          if (!result.ok)
            log.error({ task_id: task.id, reason: result.reason }, 'backoff_due refused');
          return result.ok;
        },
      );
    }
    case TimerKind.ApprovalTimeout: {
      const task = await lockTask(tx, timer.taskId);
      // Moot when the approval was decided, or this timer belongs to an earlier wait.
      const current = task?.approval;
      if (!task || task.status !== 'waiting_approval' || !current) return false;
      if (current.deadline !== timer.data?.['deadline']) return false;
      const request: TransitionRequest = {
        taskId: task.id,
        event: { type: 'approval_timeout', onTimeout: current.onTimeout },
        step: current.step,
        data: { deadline: current.deadline },
        ...(current.onTimeout === 'cancel'
          ? {
              patch: {
                error: {
                  errorClass: 'approval_timeout',
                  message: `no approval by ${current.deadline}`,
                  retryable: false,
                },
              },
            }
          : {}),
      };
      const attributes = { [ATTR_TIMER_KIND]: 'approval_timeout' };
      await inTaskTrace(task, SPAN_FIRE_TIMER, attributes, async () => {
        const result = await applyTransition(tx, request);
        recordTransition(request, result);
        if (!result.ok)
          log.error({ task_id: task.id, reason: result.reason }, 'approval timeout refused');
        else log.info({ task_id: task.id, on_timeout: current.onTimeout }, 'approval timed out');
      });
      return false;
    }
    default:
      log.warn({ timer_id: timer.id, kind: timer.kind }, 'ignored a timer of an unknown kind');
      return false;
  }
}

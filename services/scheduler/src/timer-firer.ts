/**
 * Fires due durable timers (`task_timers`) of the kinds the scheduler owns. Each fires once: it is
 * locked with SKIP LOCKED, acted on and closed in one transaction.
 */
import {
  TimerKind,
  applyTransition,
  lockDueTimers,
  lockTask,
  markTimersDone,
  type Database,
  type TimerRecord,
  type Transaction,
} from '@sluice/db';
import type { Logger } from '@sluice/telemetry';

/** What the timer firer needs. */
export interface TimerFirerDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly batchSize: number;
}

/** Fires one batch of due timers; true when the batch was full. */
export async function fireTimerBatch(deps: TimerFirerDeps): Promise<boolean> {
  const count = await deps.db.transaction(async (tx) => {
    const due = await lockDueTimers(tx, deps.batchSize);
    for (const timer of due) await fire(tx, timer, deps.log);
    await markTimersDone(
      tx,
      due.map((timer) => timer.id),
    );
    return due.length;
  });
  return count === deps.batchSize;
}

async function fire(tx: Transaction, timer: TimerRecord, log: Logger): Promise<void> {
  switch (timer.kind) {
    case TimerKind.ApprovalTimeout: {
      const task = await lockTask(tx, timer.taskId);
      // Moot when the approval was decided, or this timer belongs to an earlier wait.
      const current = task?.approval;
      if (!task || task.status !== 'waiting_approval' || !current) return;
      if (current.deadline !== timer.data?.['deadline']) return;
      const result = await applyTransition(tx, {
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
      });
      if (!result.ok)
        log.error({ task_id: task.id, reason: result.reason }, 'approval timeout refused');
      else log.info({ task_id: task.id, on_timeout: current.onTimeout }, 'approval timed out');
      return;
    }
    default:
      log.warn({ timer_id: timer.id, kind: timer.kind }, 'ignored a timer of an unknown kind');
  }
}

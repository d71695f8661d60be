/**
 * Settles tasks once nothing of theirs is in flight: a requested cancel becomes `cancelled`, a
 * requested pause becomes `paused`, a running task whose only work left is a fan-out branch waiting
 * out its retry backoff shows `failed_retryable` until then, and a task queued again by a retry
 * whose pending work is an approval asks for it again. Runs after each batch of outcomes, and
 * whenever woken. What it changes, it changes in a `sluice.scheduler.settle` span of the task's
 * trace, each transition a span event (task-trace.ts).
 */
import { isErrorClass } from '@sluice/core';
import {
  addTimer,
  applyTransition,
  armApprovalTimer,
  cancelWaitingSteps,
  closeTimers,
  hasTasksToSettle,
  lockTask,
  lockTasksToSettle,
  TimerKind,
  waitingRetry,
  type Database,
  type PendingApproval,
  type Transaction,
  type TransitionRequest,
} from '@sluice/db';
import type { Logger } from '@sluice/telemetry';
import { SPAN_SETTLE, inTaskTrace, recordTransition, type TracedTask } from './task-trace.js';

/** What the settler needs. */
export interface SettlerDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly batchSize: number;
  /** Called after a commit that armed timers (a backoff, an approval's deadline). */
  readonly onTimersArmed?: () => void;
}

/**
 * Settles one batch in one transaction; says how many tasks it settled and whether the batch was
 * full. `known`: whether tasks wait, when the caller knows it already (the outcome pass asks in its
 * transaction); else it is asked.
 */
export async function settleBatch(
  deps: SettlerDeps,
  known?: boolean,
): Promise<{ readonly more: boolean; readonly settled: number }> {
  // The usual answer is no, in one statement.
  if (!(known ?? (await hasTasksToSettle(deps.db)))) return { more: false, settled: 0 };
  const { count, armed } = await deps.db.transaction(async (tx) => {
    const due = await lockTasksToSettle(tx, deps.batchSize);
    let armedAny = false;
    for (const { taskId } of due) armedAny = (await settleOne(tx, taskId, deps.log)) || armedAny;
    return { count: due.length, armed: armedAny };
  });
  if (armed) deps.onTimersArmed?.();
  return { more: count === deps.batchSize, settled: count };
}

/** Settles one task; true when it armed a timer. */
async function settleOne(tx: Transaction, taskId: string, log: Logger): Promise<boolean> {
  const task = await lockTask(tx, taskId);
  if (!task) return false;
  const apply = (request: TransitionRequest) => check(log, tx, request);
  if (task.status === 'running' && task.cancelRequested) {
    await inTaskTrace(task, SPAN_SETTLE, {}, async () => {
      await cancelWaitingSteps(tx, task.id);
      await closeTimers(tx, task.id);
      // The task keeps the step it was stopped at, as a failed task keeps the one that failed:
      // it says where the task ended, and it is the step a retry runs first.
      await apply({ taskId, event: { type: 'cancel_completed' } });
    });
  } else if (task.status === 'running' && task.pauseRequested) {
    await inTaskTrace(task, SPAN_SETTLE, {}, () =>
      apply({ taskId, event: { type: 'pause_completed' } }),
    );
  } else if (task.status === 'running') {
    return showWaitingRetry(tx, task, log);
  } else if (task.status === 'queued' && task.approval) {
    // Retried after the approval was rejected or the task cancelled while waiting: ask again.
    const approval: PendingApproval = {
      ...task.approval,
      deadline: new Date(Date.now() + task.approval.timeoutMs).toISOString(),
    };
    await inTaskTrace(task, SPAN_SETTLE, {}, async () => {
      await apply({ taskId, event: { type: 'start' }, step: approval.step });
      await apply({
        taskId,
        event: { type: 'await_approval' },
        step: approval.step,
        data: { prompt: approval.prompt, deadline: approval.deadline, asked_again: true },
        patch: { approval, currentStep: approval.step },
      });
      await armApprovalTimer(tx, task.id, approval);
    });
    return true;
  }
  return false;
}

/**
 * A branch failed while its siblings ran, so its retry was only a fact (`step_retry_scheduled`)
 * and the task stayed `running`; now nothing else runs, so the task says what it waits for, as a
 * task whose single step failed does: `failed_retryable` with the error and the next attempt, and
 * the backoff timer that makes it `queued` again when the branch is due.
 */
async function showWaitingRetry(tx: Transaction, task: TracedTask, log: Logger): Promise<boolean> {
  const taskId = task.id;
  const waiting = await waitingRetry(tx, taskId);
  if (!waiting) return false;
  const errorClass = isErrorClass(waiting.errorClass) ? waiting.errorClass : 'unknown';
  await inTaskTrace(task, SPAN_SETTLE, {}, async () => {
    await check(log, tx, {
      taskId,
      step: waiting.step,
      event: { type: 'fail_retryable' },
      patch: { error: { errorClass, message: waiting.message, retryable: true } },
      data: {
        error_class: errorClass,
        message: waiting.message,
        next_attempt_at: waiting.dueAt.toISOString(),
        waiting_branch: true,
      },
    });
    await addTimer(tx, { taskId, kind: TimerKind.RetryBackoff, dueAt: waiting.dueAt });
  });
  return true;
}

/** Applies a settling transition, records it on the active span, and logs a refusal. */
async function check(log: Logger, tx: Transaction, request: TransitionRequest): Promise<void> {
  const applied = await applyTransition(tx, request);
  recordTransition(request, applied);
  if (!applied.ok)
    log.error({ task_id: request.taskId, reason: applied.reason }, 'settling transition refused');
}

/**
 * Settles tasks once nothing of theirs is in flight: a requested cancel becomes `cancelled`, a
 * requested pause becomes `paused`, and a task queued again by a retry whose pending work is an
 * approval asks for it again. Runs after each batch of outcomes, and whenever woken.
 */
import {
  applyTransition,
  armApprovalTimer,
  cancelWaitingSteps,
  closeTimers,
  lockTask,
  lockTasksToSettle,
  type Database,
  type PendingApproval,
  type Transaction,
} from '@sluice/db';
import type { Logger } from '@sluice/telemetry';

/** What the settler needs. */
export interface SettlerDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly batchSize: number;
}

/** Settles one batch in one transaction; true when the batch was full. */
export async function settleBatch(deps: SettlerDeps): Promise<boolean> {
  const count = await deps.db.transaction(async (tx) => {
    const due = await lockTasksToSettle(tx, deps.batchSize);
    for (const { taskId } of due) await settleOne(tx, taskId, deps.log);
    return due.length;
  });
  return count === deps.batchSize;
}

async function settleOne(tx: Transaction, taskId: string, log: Logger): Promise<void> {
  const task = await lockTask(tx, taskId);
  if (!task) return;
  if (task.status === 'running' && task.cancelRequested) {
    await cancelWaitingSteps(tx, task.id);
    await closeTimers(tx, task.id);
    await check(
      log,
      task.id,
      applyTransition(tx, {
        taskId,
        event: { type: 'cancel_completed' },
        patch: { currentStep: null },
      }),
    );
  } else if (task.status === 'running' && task.pauseRequested) {
    await check(log, task.id, applyTransition(tx, { taskId, event: { type: 'pause_completed' } }));
  } else if (task.status === 'queued' && task.approval) {
    // Retried after the approval was rejected or the task cancelled while waiting: ask again.
    const approval: PendingApproval = {
      ...task.approval,
      deadline: new Date(Date.now() + task.approval.timeoutMs).toISOString(),
    };
    await check(
      log,
      task.id,
      applyTransition(tx, { taskId, event: { type: 'start' }, step: approval.step }),
    );
    await check(
      log,
      task.id,
      applyTransition(tx, {
        taskId,
        event: { type: 'await_approval' },
        step: approval.step,
        data: { prompt: approval.prompt, deadline: approval.deadline, asked_again: true },
        patch: { approval, currentStep: approval.step },
      }),
    );
    await armApprovalTimer(tx, task.id, approval);
  }
}

async function check(
  log: Logger,
  taskId: string,
  result: ReturnType<typeof applyTransition>,
): Promise<void> {
  const applied = await result;
  if (!applied.ok)
    log.error({ task_id: taskId, reason: applied.reason }, 'settling transition refused');
}

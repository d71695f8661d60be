/**
 * The lifecycle requests of people and callers — cancel, pause, resume, retry, approve, reject —
 * each one transaction: the transition the table allows (or a refusal that changes nothing), plus
 * what it implies for the task's steps and timers. What must happen outside Postgres afterwards
 * (abort running steps, wake the scheduler) is returned as flags.
 */
import {
  decideTransition,
  isErrorClass,
  isTaskStatus,
  type Json,
  type SerializedStepError,
  type TaskEvent,
} from '@sluice/core';
import {
  TimerKind,
  addTimer,
  applyTransition,
  armApprovalTimer,
  cancelWaitingSteps,
  closeTimers,
  failStepWhoseContinuationFailed,
  hasStepsForRetry,
  lockTask,
  markTaskDeadLettersRedriven,
  rerunUnfinishedSteps,
  startContinuation,
  waitingRetry,
  type Database,
  type PendingApproval,
  type TaskRecord,
  type Transaction,
  type TransitionRequest,
  type TransitionResult,
  type WaitingRetry,
} from '@sluice/db';

/** The outcome of a lifecycle request. */
export type LifecycleResult =
  | {
      readonly ok: true;
      /** Running steps must be aborted (a cancel of a running task). */
      readonly abortRunning: boolean;
      /** The scheduler has work: ready steps, or a cancel/pause to settle. */
      readonly wakeScheduler: boolean;
    }
  | {
      readonly ok: false;
      readonly code: Extract<TransitionResult, { ok: false }>['code'];
      readonly reason: string;
    };

type Refused = Extract<LifecycleResult, { ok: false }>;

function refused(result: Extract<TransitionResult, { ok: false }>): Refused {
  return { ok: false, code: result.code, reason: result.reason };
}

const DONE = { ok: true, abortRunning: false, wakeScheduler: false } as const;

/** What a command needs. */
export interface LifecycleTarget {
  readonly tenantId: string;
  readonly taskId: string;
}

export function cancelTask(
  db: Database,
  target: LifecycleTarget,
  reason: string,
): Promise<LifecycleResult> {
  return db.transaction(async (tx) => {
    const result = await applyTransition(tx, {
      ...target,
      event: { type: 'cancel' },
      data: reason === '' ? {} : { reason },
    });
    if (!result.ok) return refused(result);
    // Steps that have not started never will; running ones are aborted through their signal.
    await cancelWaitingSteps(tx, target.taskId);
    await closeTimers(tx, target.taskId);
    const requested = result.to.cancelRequested;
    return { ok: true, abortRunning: requested, wakeScheduler: requested };
  });
}

export function pauseTask(db: Database, target: LifecycleTarget): Promise<LifecycleResult> {
  return db.transaction(async (tx) => {
    const result = await applyTransition(tx, { ...target, event: { type: 'pause' } });
    if (!result.ok) return refused(result);
    // A running task pauses once its running steps end: the scheduler settles it.
    return { ...DONE, wakeScheduler: result.to.pauseRequested };
  });
}

export function resumeTask(db: Database, target: LifecycleTarget): Promise<LifecycleResult> {
  return db.transaction(async (tx) => {
    const task = await lockOwnTask(tx, target);
    if (!task) return { ok: false, code: 'not_found', reason: 'task not found' };
    // With the approval still pending, the task waits again, with a new deadline.
    const approval = task.approvalPending && task.approval ? rearmed(task.approval) : undefined;
    // A step that failed while the pause was requested waits out its backoff in the ready queue:
    // until it ends, the task waits as a task whose step failed does (`failed_retryable`, its
    // failure and next attempt shown), and the backoff's timer queues it.
    const waiting =
      approval || task.status !== 'paused' ? undefined : await waitingRetry(tx, task.id);
    const retry = waiting && !waiting.dueNow ? waiting : undefined;
    const result = await applyTransition(tx, {
      ...target,
      event: { type: 'resume', ...(retry ? { retryWaiting: true } : {}) },
      ...(approval ? { patch: { approval }, data: { deadline: approval.deadline } } : {}),
      ...(retry ? retryWaitingFacts(retry) : {}),
    });
    if (!result.ok) return refused(result);
    if (approval) await armApprovalTimer(tx, target.taskId, approval);
    if (retry && result.to.status === 'failed_retryable') {
      await addTimer(tx, { taskId: task.id, kind: TimerKind.RetryBackoff, dueAt: retry.dueAt });
    }
    return { ...DONE, wakeScheduler: result.to.status === 'queued' };
  });
}

export function retryTask(db: Database, target: LifecycleTarget): Promise<LifecycleResult> {
  return db.transaction(async (tx) => {
    const task = await lockOwnTask(tx, target);
    if (!task) return { ok: false, code: 'not_found', reason: 'task not found' };
    return retryLockedTask(tx, task);
  });
}

/**
 * Retries a task whose row the transaction has locked (RetryTask, and a dead letter's redrive):
 * the `retry` transition, with `data` on its event, and the steps it runs again.
 */
export async function retryLockedTask(
  tx: Transaction,
  task: TaskRecord,
  data?: Record<string, Json>,
): Promise<LifecycleResult> {
  // A retry that would run nothing would leave the task queued for ever: refused, saying why (the
  // table's refusal of a task that is not failed or cancelled comes first).
  if (
    allowedNow(task, { type: 'retry' }) &&
    !task.approval &&
    !(await hasStepsForRetry(tx, task.id))
  ) {
    return {
      ok: false,
      code: 'refused',
      reason:
        'the task has nothing to run again: every step it ran succeeded and no approval is pending',
    };
  }
  const result = await applyTransition(tx, {
    taskId: task.id,
    tenantId: task.tenantId,
    event: { type: 'retry' },
    ...(data ? { data } : {}),
  });
  if (!result.ok) return refused(result);
  // The retry answers the task's dead letters (a redrive is a retry; a plain RetryTask of a
  // dead-lettered task is one too): they stay listed, marked redriven, and cannot be redriven again.
  await markTaskDeadLettersRedriven(tx, task.id);
  // Succeeded steps are kept; failed and cancelled ones run again in the new attempt. A task
  // whose pending work was an approval is asked again by the scheduler.
  const rerun = await rerunUnfinishedSteps(tx, { ...task, attempt: task.attempt + 1 });
  return { ...DONE, wakeScheduler: rerun.length > 0 || task.approval !== null };
}

export function decideApproval(
  db: Database,
  target: LifecycleTarget,
  decision: { approved: boolean; comment: string },
): Promise<LifecycleResult> {
  return db.transaction(async (tx) => {
    const task = await lockOwnTask(tx, target);
    if (!task) return { ok: false, code: 'not_found', reason: 'task not found' };
    const approval = task.approval;
    const data: Record<string, Json> = decision.comment === '' ? {} : { comment: decision.comment };
    if (!decision.approved) {
      const rejected = await applyTransition(tx, {
        ...target,
        event: { type: 'reject' },
        step: approval?.step ?? null,
        data: { ...data, reason: 'rejected' },
      });
      if (!rejected.ok) return refused(rejected);
      await closeTimers(tx, target.taskId, TimerKind.ApprovalTimeout);
      return DONE;
    }
    if (!approval || !allowedNow(task, { type: 'approve' })) {
      // Let the table say why (not waiting for an approval), changing nothing.
      const refusedApproval = await applyTransition(tx, { ...target, event: { type: 'approve' } });
      if (refusedApproval.ok) throw new Error(`task ${task.id} was approved without an approval`);
      return refused(refusedApproval);
    }
    await closeTimers(tx, target.taskId, TimerKind.ApprovalTimeout);
    // Start what the approval lets run, then record the approval naming it (the row is locked).
    const started = await startContinuation(tx, task, approval.then, {
      seq: approval.originSeq,
      fanOutOf: null,
      branchIndex: null,
    });
    const approved = await applyTransition(tx, {
      ...target,
      event: { type: 'approve' },
      step: approval.step,
      data: started.ok ? { ...data, next: started.steps } : data,
      patch: { approval: null, ...(started.ok ? { currentStep: started.label } : {}) },
    });
    if (!approved.ok) throw new Error(`cannot approve task ${task.id}: ${approved.reason}`);
    if (!started.ok) {
      // The step that asked fails with the task, so that a retry runs it (and asks) again.
      const error: SerializedStepError = {
        errorClass: 'schema_validation',
        message: started.reason,
        retryable: false,
      };
      await failStepWhoseContinuationFailed(tx, task.id, approval.originSeq, error);
      const failed = await applyTransition(tx, {
        taskId: target.taskId,
        event: { type: 'fail_terminal' },
        step: approval.step,
        patch: { error },
      });
      if (!failed.ok) throw new Error(`cannot fail task ${task.id}: ${failed.reason}`);
      return DONE;
    }
    return { ...DONE, wakeScheduler: true };
  });
}

/** Whether the table lets `event` happen to the locked task now. */
function allowedNow(task: TaskRecord, event: TaskEvent): boolean {
  return (
    isTaskStatus(task.status) &&
    decideTransition(
      {
        status: task.status,
        cancelRequested: task.cancelRequested,
        pauseRequested: task.pauseRequested,
        approvalPending: task.approvalPending,
      },
      event,
    ).ok
  );
}

async function lockOwnTask(
  tx: Transaction,
  target: LifecycleTarget,
): Promise<TaskRecord | undefined> {
  const task = await lockTask(tx, target.taskId);
  return task && task.tenantId === target.tenantId ? task : undefined;
}

/** The failure and next attempt a resume into a retry's backoff records, as a failure would. */
function retryWaitingFacts(
  retry: WaitingRetry,
): Pick<TransitionRequest, 'step' | 'patch' | 'data'> {
  const errorClass = isErrorClass(retry.errorClass) ? retry.errorClass : 'unknown';
  return {
    step: retry.step,
    patch: { error: { errorClass, message: retry.message, retryable: true } },
    data: {
      error_class: errorClass,
      message: retry.message,
      next_attempt_at: retry.dueAt.toISOString(),
    },
  };
}

function rearmed(approval: PendingApproval): PendingApproval {
  return { ...approval, deadline: new Date(Date.now() + approval.timeoutMs).toISOString() };
}

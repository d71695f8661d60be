/**
 * Dead letters for `AdminService`: how a stored letter is shown (with its task's state and latest
 * events) and how one is redriven (a retry of its task and the mark, in one transaction).
 */
import {
  toTimestamp,
  type DeadLetter,
  type DeadLetterReason as ApiDeadLetterReason,
  type ErrorClass,
  type RedriveResult,
} from '@sluice/api';
import {
  findDeadLetter,
  findTask,
  listTaskEvents,
  lockDeadLetter,
  lockTask,
  type Database,
  type DeadLetterReason,
  type DeadLetterRecord,
  type Executor,
} from '@sluice/db';
import { eventToApi, statusToApi } from '../tasks/mapping.js';
import { retryLockedTask } from '../tasks/lifecycle.js';

/** How many of a task's latest events a listed letter carries. */
export const DEAD_LETTER_RECENT_EVENTS = 20;

const REASON_TO_API: Record<DeadLetterReason, ApiDeadLetterReason> = {
  attempts_exhausted: 'DEAD_LETTER_REASON_ATTEMPTS_EXHAUSTED',
  max_deliveries: 'DEAD_LETTER_REASON_MAX_DELIVERIES',
  terminated: 'DEAD_LETTER_REASON_TERMINATED',
};

/** A stored letter as `sluice.v1.DeadLetter`, with its task's status and latest events. */
export async function describeDeadLetter(
  executor: Executor,
  letter: DeadLetterRecord,
): Promise<DeadLetter> {
  const task = await findTask(executor, letter.tenantId, letter.taskId);
  const afterSeq = Math.max(0, (task?.lastEventSeq ?? 0) - DEAD_LETTER_RECENT_EVENTS);
  const events = task ? await listTaskEvents(executor, task.id, afterSeq) : [];
  return {
    dead_letter_id: letter.id,
    task_id: letter.taskId,
    tenant_id: letter.tenantId,
    step: letter.step,
    step_seq: letter.stepSeq,
    reason: REASON_TO_API[letter.reason],
    error: {
      error_class: `ERROR_CLASS_${letter.error.errorClass.toUpperCase()}` as ErrorClass,
      message: letter.error.message,
      retryable: letter.error.retryable,
    },
    attempts: letter.attempts,
    create_time: toTimestamp(letter.createdAt),
    redrive_time: letter.redrivenAt ? toTimestamp(letter.redrivenAt) : null,
    task_status: statusToApi(task?.status ?? null),
    recent_events: events.map(eventToApi),
  };
}

/** What redriving one letter did; `wakeScheduler` when the retry left steps to run. */
export interface Redrive {
  readonly result: RedriveResult;
  readonly wakeScheduler: boolean;
}

/**
 * Redrives one letter in one transaction: its task and the letter are locked (two concurrent
 * redrives of it cannot both retry its task), the task retried as RetryTask does, and the letter
 * marked. A letter that cannot be redriven changes nothing and says why.
 *
 * The task is locked before the letter, in the order of every retry (RetryTask locks the task,
 * then marks all its letters): locking the letter first, a redrive waiting for the task while a
 * RetryTask of it, or a redrive of another letter of it, waited to mark this letter was a deadlock
 * that Postgres broke by failing one of them (INTERNAL).
 */
export function redriveDeadLetter(db: Database, id: string): Promise<Redrive> {
  return db.transaction(async (tx) => {
    const refuse = (reason: string, taskId = ''): Redrive => ({
      result: { dead_letter_id: id, task_id: taskId, redriven: false, reason },
      wakeScheduler: false,
    });
    // A letter's task never changes, so it may be read before anything is locked.
    const seen = await findDeadLetter(tx, id);
    if (!seen) return refuse('dead letter not found');
    const task = await lockTask(tx, seen.taskId);
    const letter = await lockDeadLetter(tx, id);
    if (!letter) return refuse('dead letter not found');
    if (letter.redrivenAt) return refuse('already redriven', letter.taskId);
    if (!task) return refuse('task not found', letter.taskId);
    if (task.status !== 'failed_terminal') {
      return refuse(`task is ${task.status}, not failed_terminal`, letter.taskId);
    }
    // The retry marks this letter (and any other open one of the task) redriven.
    const retried = await retryLockedTask(tx, task, { reason: 'redrive', dead_letter_id: id });
    if (!retried.ok) return refuse(retried.reason, letter.taskId);
    return {
      result: { dead_letter_id: id, task_id: letter.taskId, redriven: true, reason: '' },
      wakeScheduler: retried.wakeScheduler,
    };
  });
}

/**
 * Conversion between the stored records and the API's messages. Proto enums are converted only
 * here, at the edge; inside, priorities are numbers and statuses the core's words.
 */
import type { ErrorClass as CoreErrorClass, Priority as CorePriority } from '@sluice/core';
import { decideTransition, isTaskStatus } from '@sluice/core';
import {
  estimateWaitMs,
  type IdempotencyTombstone,
  type QueueStanding,
  type TaskEventRecord,
  type TaskRecord,
} from '@sluice/db';
import {
  toDuration,
  toTimestamp,
  type ErrorClass,
  type Priority,
  type Task,
  type TaskEvent,
  type TaskStatus,
} from '@sluice/api';

const PRIORITY_TO_API: Record<CorePriority, Priority> = {
  0: 'PRIORITY_P0',
  1: 'PRIORITY_P1',
  2: 'PRIORITY_P2',
  3: 'PRIORITY_P3',
};

/** The core priority of an API value; `undefined` for unspecified or unknown values. */
export function priorityFromApi(value: string | number): CorePriority | undefined {
  switch (value) {
    case 'PRIORITY_P0':
    case 1:
      return 0;
    case 'PRIORITY_P1':
    case 2:
      return 1;
    case 'PRIORITY_P2':
    case 3:
      return 2;
    case 'PRIORITY_P3':
    case 4:
      return 3;
    default:
      return undefined;
  }
}

/** The API status of a stored status word. */
export function statusToApi(status: string | null): TaskStatus {
  if (status === null || !isTaskStatus(status)) return 'TASK_STATUS_UNSPECIFIED';
  return `TASK_STATUS_${status.toUpperCase()}` as TaskStatus;
}

/** The core status of an API filter value; `undefined` for unspecified (no filter) or unknown. */
export function statusFromApi(value: string | number): string | undefined {
  if (typeof value !== 'string' || !value.startsWith('TASK_STATUS_')) return undefined;
  const word = value.slice('TASK_STATUS_'.length).toLowerCase();
  return isTaskStatus(word) ? word : undefined;
}

function errorClassToApi(errorClass: CoreErrorClass): ErrorClass {
  return `ERROR_CLASS_${errorClass.toUpperCase()}` as ErrorClass;
}

/**
 * A stored task as the API's `Task`. `standing` is the task's place in the ready queue, for a
 * queued task (its estimated wait and position); `nextAttempt` when a failed step waits to retry;
 * `waitingFor` when its next step is kept from admission (see `waiting-reason.ts`).
 */
export function taskToApi(
  task: TaskRecord,
  standing?: QueueStanding,
  nextAttempt?: Date,
  waitingFor = '',
): Task {
  const waitMs = standing ? estimateWaitMs(standing) : undefined;
  const status = isTaskStatus(task.status) ? task.status : null;
  const approvalShown =
    task.approval !== null && (task.status === 'waiting_approval' || task.approvalPending);
  return {
    task_id: task.id,
    tenant_id: task.tenantId,
    type: task.type,
    type_version: task.typeVersion,
    priority: PRIORITY_TO_API[task.priority as CorePriority],
    input: JSON.stringify(task.input),
    idempotency_key: task.idempotencyKey ?? '',
    status: statusToApi(task.status),
    current_step: task.currentStep ?? '',
    attempt: task.attempt,
    error: task.error
      ? {
          error_class: errorClassToApi(task.error.errorClass),
          message: task.error.message,
          retryable: task.error.retryable,
        }
      : null,
    trace_id: task.traceId ?? '',
    create_time: toTimestamp(task.createdAt),
    start_time: task.startedAt ? toTimestamp(task.startedAt) : null,
    finish_time: task.finishedAt ? toTimestamp(task.finishedAt) : null,
    update_time: toTimestamp(task.updatedAt),
    cancel_requested: task.cancelRequested,
    pause_requested: task.pauseRequested,
    output: task.output === null || task.output === undefined ? '' : JSON.stringify(task.output),
    last_event_seq: String(task.lastEventSeq),
    progress: task.progress,
    progress_message: task.progressMessage,
    estimated_wait: waitMs === undefined ? null : toDuration(waitMs),
    queue_position: standing?.ahead ?? 0,
    can_cancel:
      status !== null &&
      decideTransition(
        {
          status,
          cancelRequested: task.cancelRequested,
          pauseRequested: task.pauseRequested,
          approvalPending: task.approvalPending,
        },
        { type: 'cancel' },
      ).ok,
    approval:
      approvalShown && task.approval
        ? {
            prompt: task.approval.prompt,
            step: task.approval.step,
            // Paused with the approval pending, no deadline runs (no timer exists): a resume sets
            // one, counted from then. The stored one (set at the pause, or already past) is moot.
            deadline: task.approvalPending ? null : toTimestamp(new Date(task.approval.deadline)),
            on_timeout:
              task.approval.onTimeout === 'pause'
                ? 'APPROVAL_TIMEOUT_ACTION_PAUSE'
                : 'APPROVAL_TIMEOUT_ACTION_CANCEL',
          }
        : null,
    next_attempt_time: nextAttempt ? toTimestamp(nextAttempt) : null,
    waiting_for: waitingFor,
  };
}

/**
 * What the API shows of a task retention has deleted, from its idempotency key's tombstone: who it
 * was (id, type, priority, key), how it ended and when. Input, output and history are gone.
 */
export function tombstoneToApi(tombstone: IdempotencyTombstone): Task {
  const finishedAt = tombstone.finishedAt ?? tombstone.createdAt;
  return {
    task_id: tombstone.taskId,
    tenant_id: tombstone.tenantId,
    type: tombstone.type,
    type_version: tombstone.typeVersion,
    priority: PRIORITY_TO_API[tombstone.priority as CorePriority],
    input: '',
    idempotency_key: tombstone.idempotencyKey,
    status: statusToApi(tombstone.status),
    current_step: '',
    attempt: 0,
    error: null,
    trace_id: '',
    create_time: toTimestamp(tombstone.taskCreatedAt),
    start_time: null,
    finish_time: toTimestamp(finishedAt),
    update_time: toTimestamp(finishedAt),
    cancel_requested: false,
    pause_requested: false,
    output: '',
    last_event_seq: '0',
    progress: 0,
    progress_message: '',
    estimated_wait: null,
    queue_position: 0,
    can_cancel: false,
    approval: null,
    next_attempt_time: null,
    waiting_for: '',
  };
}

/** A stored event as the API's `TaskEvent`. */
export function eventToApi(event: TaskEventRecord): TaskEvent {
  return {
    task_id: event.taskId,
    seq: String(event.seq),
    type: event.type,
    from_status: statusToApi(event.fromStatus),
    to_status: statusToApi(event.toStatus),
    step: event.step ?? '',
    create_time: toTimestamp(event.createdAt),
    data: event.data ? JSON.stringify(event.data) : '',
  };
}

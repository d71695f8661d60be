/**
 * The task state machine of ARCHITECTURE.md, as data. This table is the only place that knows which
 * transitions exist; `db`'s transition function and every service ask it.
 */

/** Every state a task can be in. */
export const TaskStatus = {
  Queued: 'queued',
  Running: 'running',
  WaitingApproval: 'waiting_approval',
  Succeeded: 'succeeded',
  FailedRetryable: 'failed_retryable',
  FailedTerminal: 'failed_terminal',
  Cancelled: 'cancelled',
  Paused: 'paused',
} as const;
export type TaskStatus = (typeof TaskStatus)[keyof typeof TaskStatus];

/** All task states, in the order of the architecture document. */
export const TASK_STATUSES: readonly TaskStatus[] = Object.values(TaskStatus);

/**
 * States nothing moves out of by itself. `succeeded` is final for good; `failed_terminal` and
 * `cancelled` only leave through an explicit `retry`.
 */
export const FINAL_STATUSES: ReadonlySet<TaskStatus> = new Set([
  TaskStatus.Succeeded,
  TaskStatus.FailedTerminal,
  TaskStatus.Cancelled,
]);

/** True when the task will not change again unless a person asks for a retry. */
export function isFinalStatus(status: TaskStatus): boolean {
  return FINAL_STATUSES.has(status);
}

/** Type guard for untrusted strings (database rows, messages). */
export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && (TASK_STATUSES as readonly string[]).includes(value);
}

/**
 * Everything that can happen to a task. Names say what happened, not which state follows; the
 * table decides the state.
 */
export const TaskEventType = {
  /** The gateway accepted the task. */
  Create: 'create',
  /** The first step of this attempt started on an executor. */
  Start: 'start',
  /** A step succeeded and another follows (next, fan-out or join). */
  Continue: 'continue',
  /** A step returned `complete`: the task succeeded. */
  Complete: 'complete',
  /** A step asked a person for approval. */
  AwaitApproval: 'await_approval',
  /** A step failed and may be retried after a backoff. */
  FailRetryable: 'fail_retryable',
  /** A step failed for good (terminal class, attempts exhausted or dead letter). */
  FailTerminal: 'fail_terminal',
  /** A person (or caller) asked to cancel. On a running task this only requests it. */
  Cancel: 'cancel',
  /** The running step of a task with `cancel_requested` has stopped. */
  CancelCompleted: 'cancel_completed',
  /** A person asked to pause. On a running task this only requests it. */
  Pause: 'pause',
  /** No step of a task with `pause_requested` is running any more. */
  PauseCompleted: 'pause_completed',
  Approve: 'approve',
  Reject: 'reject',
  /** The approval was not given in time; the type declares pause or cancel. */
  ApprovalTimeout: 'approval_timeout',
  /** The retry backoff of a failed step is due. */
  BackoffDue: 'backoff_due',
  Resume: 'resume',
  /** A person asked to run a failed or cancelled task again (attempt + 1). */
  Retry: 'retry',
} as const;
export type TaskEventType = (typeof TaskEventType)[keyof typeof TaskEventType];

export const TASK_EVENT_TYPES: readonly TaskEventType[] = Object.values(TaskEventType);

/** Type guard for untrusted strings. */
export function isTaskEventType(value: unknown): value is TaskEventType {
  return typeof value === 'string' && (TASK_EVENT_TYPES as readonly string[]).includes(value);
}

/** What an approval timeout does, as the task type declares it. */
export type ApprovalTimeoutAction = 'pause' | 'cancel';

/** An event with the data the table needs to decide. */
export type TaskEvent =
  | { readonly type: Exclude<TaskEventType, 'approval_timeout' | 'pause_completed' | 'resume'> }
  | { readonly type: 'approval_timeout'; readonly onTimeout: ApprovalTimeoutAction }
  /**
   * `retryWaiting`: the paused task's work is a failed step's retry whose backoff has not ended
   * (it failed while the pause was requested): the task waits it out as any task does.
   */
  | { readonly type: 'resume'; readonly retryWaiting?: boolean }
  /**
   * `approvalPending`: the step that ended asked for an approval, which stays pending while the
   * task is paused (a resume then waits for it).
   */
  | { readonly type: 'pause_completed'; readonly approvalPending?: boolean };

/** The part of a task the table looks at. */
export interface TaskMachineState {
  readonly status: TaskStatus | null;
  /** A cancel was asked for while a step ran; the task becomes `cancelled` when it stops. */
  readonly cancelRequested: boolean;
  /** A pause was asked for while a step ran; the task becomes `paused` when no step runs. */
  readonly pauseRequested: boolean;
  /** The task was paused (by timeout) while an approval was still pending. */
  readonly approvalPending: boolean;
}

/** The state of a task that does not exist yet; only `create` applies to it. */
export const NO_TASK: TaskMachineState = {
  status: null,
  cancelRequested: false,
  pauseRequested: false,
  approvalPending: false,
};

/** The result of asking the table. */
export type TransitionDecision =
  | { readonly ok: true; readonly to: TaskMachineState; readonly attemptIncrement: 0 | 1 }
  | { readonly ok: false; readonly reason: string };

function to(
  status: TaskStatus,
  flags: Partial<Omit<TaskMachineState, 'status'>> = {},
  attemptIncrement: 0 | 1 = 0,
): TransitionDecision {
  return {
    ok: true,
    to: {
      status,
      cancelRequested: flags.cancelRequested ?? false,
      pauseRequested: flags.pauseRequested ?? false,
      approvalPending: flags.approvalPending ?? false,
    },
    attemptIncrement,
  };
}

function refuse(from: TaskMachineState, event: TaskEvent, why?: string): TransitionDecision {
  const where = from.status ?? 'a task that does not exist';
  return { ok: false, reason: why ?? `cannot ${event.type} a task that is ${where}` };
}

/**
 * The transition table. Returns the next state for `event` applied to `from`, or the reason it is
 * not allowed. Pure and total: every (state, event) pair has an answer.
 */
export function decideTransition(from: TaskMachineState, event: TaskEvent): TransitionDecision {
  const s = from.status;
  if (s === null) return event.type === 'create' ? to('queued') : refuse(from, event);
  switch (event.type) {
    case 'create':
      return refuse(from, event, 'the task exists already');
    case 'start':
      return s === 'queued' ? to('running') : refuse(from, event);
    case 'continue':
      if (s !== 'running') return refuse(from, event);
      return to('running', {
        cancelRequested: from.cancelRequested,
        pauseRequested: from.pauseRequested,
      });
    case 'complete':
      return s === 'running' ? to('succeeded') : refuse(from, event);
    case 'await_approval':
      return s === 'running' ? to('waiting_approval') : refuse(from, event);
    case 'fail_retryable':
      return s === 'running' ? to('failed_retryable') : refuse(from, event);
    case 'fail_terminal':
      return s === 'running' ? to('failed_terminal') : refuse(from, event);
    case 'cancel':
      switch (s) {
        case 'queued':
        case 'waiting_approval':
        case 'failed_retryable':
        case 'paused':
          return to('cancelled');
        case 'running':
          return from.cancelRequested
            ? refuse(from, event, 'a cancel was already requested')
            : // A cancel supersedes a pending pause: the task ends cancelled, not paused.
              to('running', { cancelRequested: true });
        default:
          return refuse(from, event);
      }
    case 'cancel_completed':
      return s === 'running' && from.cancelRequested
        ? to('cancelled')
        : refuse(from, event, 'no cancel was requested on a running task');
    case 'pause':
      switch (s) {
        case 'queued':
          return to('paused');
        case 'running':
          if (from.pauseRequested) return refuse(from, event, 'a pause was already requested');
          if (from.cancelRequested) return refuse(from, event, 'the task is being cancelled');
          return to('running', { pauseRequested: true });
        default:
          return refuse(from, event);
      }
    case 'pause_completed':
      return s === 'running' && from.pauseRequested && !from.cancelRequested
        ? to('paused', { approvalPending: event.approvalPending ?? false })
        : refuse(from, event, 'no pause was requested on a running task');
    case 'approve':
      return s === 'waiting_approval' ? to('running') : refuse(from, event);
    case 'reject':
      return s === 'waiting_approval' ? to('cancelled') : refuse(from, event);
    case 'approval_timeout':
      if (s !== 'waiting_approval') return refuse(from, event);
      return event.onTimeout === 'pause'
        ? to('paused', { approvalPending: true })
        : to('cancelled');
    case 'backoff_due':
      return s === 'failed_retryable' ? to('queued') : refuse(from, event);
    case 'resume':
      if (s !== 'paused') return refuse(from, event);
      if (from.approvalPending) return to('waiting_approval');
      return event.retryWaiting === true ? to('failed_retryable') : to('queued');
    case 'retry':
      return s === 'failed_terminal' || s === 'cancelled'
        ? to('queued', {}, 1)
        : refuse(from, event);
  }
}

/**
 * The statuses an event may be applied to: what the conditional update puts in its
 * `WHERE status IN (…)`. Derived from the table, so the two cannot disagree.
 */
export function allowedSourceStatuses(event: TaskEvent): TaskStatus[] {
  return TASK_STATUSES.filter((status) =>
    [false, true].some((cancelRequested) =>
      [false, true].some((pauseRequested) =>
        [false, true].some(
          (approvalPending) =>
            decideTransition({ status, cancelRequested, pauseRequested, approvalPending }, event)
              .ok,
        ),
      ),
    ),
  );
}

/**
 * Rebuilds the table's event from a recorded event row (its type and data), e.g. to replay a
 * history. Returns `undefined` for a recorded fact that is not a transition (`step_started` …).
 */
export function eventFromRecord(
  type: string,
  data: Readonly<Record<string, unknown>> | null | undefined,
): TaskEvent | undefined {
  if (!isTaskEventType(type)) return undefined;
  switch (type) {
    case 'approval_timeout':
      return { type, onTimeout: data?.['on_timeout'] === 'cancel' ? 'cancel' : 'pause' };
    case 'pause_completed':
      return { type, approvalPending: data?.['approval_pending'] === true };
    case 'resume':
      return data?.['retry_waiting'] === true ? { type, retryWaiting: true } : { type };
    default:
      return { type };
  }
}

/** One recorded event of a task's history, as far as the table cares. */
export interface HistoryEntry {
  readonly event: TaskEvent;
  readonly toStatus: TaskStatus;
}

/**
 * Replays a recorded history through the table. Returns `undefined` when it is a path in the table
 * (starting with `create`), or a description of the first step that is not.
 */
export function historyProblem(history: readonly HistoryEntry[]): string | undefined {
  let state = NO_TASK;
  for (const [index, entry] of history.entries()) {
    const decision = decideTransition(state, entry.event);
    if (!decision.ok) return `event ${index + 1} (${entry.event.type}): ${decision.reason}`;
    if (decision.to.status !== entry.toStatus) {
      return `event ${index + 1} (${entry.event.type}) recorded ${entry.toStatus}, table says ${decision.to.status}`;
    }
    state = decision.to;
  }
  return undefined;
}

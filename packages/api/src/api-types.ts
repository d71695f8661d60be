/**
 * The TypeScript shapes of the `sluice.v1` messages as the gateway's handlers and the SDK's client
 * see them, written by hand to match `proto/sluice/v1/*.proto` (the gateway's `load-api.ts` checks
 * the enums and methods against the compiled descriptors at start).
 *
 * They follow {@link PROTO_LOADER_OPTIONS}:
 * - field names are the proto names, snake_case (`task_id`): a camelCase key is silently dropped
 *   on the wire, so these types are the guard against it;
 * - enums are their value names (`'PRIORITY_P0'`); a received enum value this server does not
 *   know arrives as its number;
 * - 64-bit integers are decimal strings (`last_event_seq: '42'`);
 * - every scalar field of a received message is present (proto3 defaults: `''`, `0`, `false`,
 *   the `_UNSPECIFIED` value); an unset message field is `null`.
 */

/** The values of `sluice.v1.Priority`, in number order (`PRIORITY_P0` is 1). */
export const PRIORITY_VALUES = [
  'PRIORITY_UNSPECIFIED',
  'PRIORITY_P0',
  'PRIORITY_P1',
  'PRIORITY_P2',
  'PRIORITY_P3',
] as const;
/** `sluice.v1.Priority`. */
export type Priority = (typeof PRIORITY_VALUES)[number];

/** The values of `sluice.v1.TaskStatus`, in number order. */
export const TASK_STATUS_VALUES = [
  'TASK_STATUS_UNSPECIFIED',
  'TASK_STATUS_QUEUED',
  'TASK_STATUS_RUNNING',
  'TASK_STATUS_WAITING_APPROVAL',
  'TASK_STATUS_SUCCEEDED',
  'TASK_STATUS_FAILED_RETRYABLE',
  'TASK_STATUS_FAILED_TERMINAL',
  'TASK_STATUS_CANCELLED',
  'TASK_STATUS_PAUSED',
] as const;
/** `sluice.v1.TaskStatus`. */
export type TaskStatus = (typeof TASK_STATUS_VALUES)[number];

/** The values of `sluice.v1.ErrorClass`, in number order. */
export const ERROR_CLASS_VALUES = [
  'ERROR_CLASS_UNSPECIFIED',
  'ERROR_CLASS_LLM_RATE_LIMIT',
  'ERROR_CLASS_TOOL_TIMEOUT',
  'ERROR_CLASS_SCHEMA_VALIDATION',
  'ERROR_CLASS_PERMISSION_DENIED',
  'ERROR_CLASS_APPROVAL_TIMEOUT',
  'ERROR_CLASS_EXTERNAL_5XX',
  'ERROR_CLASS_CANCELLED',
  'ERROR_CLASS_UNKNOWN',
] as const;
/** `sluice.v1.ErrorClass`. */
export type ErrorClass = (typeof ERROR_CLASS_VALUES)[number];

/**
 * An enum field of a received request: the value's name, or its number when the client sent one
 * this server does not know (validate it; e.g. a priority outside P0-P3 is `INVALID_ARGUMENT`).
 */
export type ReceivedEnum<E extends string> = E | number;

/**
 * `google.protobuf.Timestamp`: seconds since the Unix epoch as a decimal string (an int64),
 * and the non-negative nanoseconds within that second. Build one with `toTimestamp`.
 */
export interface Timestamp {
  seconds: string;
  nanos: number;
}

/** `google.protobuf.Duration`: whole seconds as a decimal string (an int64), plus nanoseconds. */
export interface Duration {
  seconds: string;
  nanos: number;
}

/** `sluice.v1.TaskError`: the most recent failure of a task. */
export interface TaskError {
  error_class: ErrorClass;
  message: string;
  retryable: boolean;
}

/** `sluice.v1.Task`. Field meanings are documented in `proto/sluice/v1/task.proto`. */
export interface Task {
  task_id: string;
  tenant_id: string;
  type: string;
  type_version: number;
  priority: Priority;
  /** JSON text. */
  input: string;
  /** `''` when the task was created without one. */
  idempotency_key: string;
  status: TaskStatus;
  current_step: string;
  attempt: number;
  /** `null` while the task has not failed. */
  error: TaskError | null;
  trace_id: string;
  create_time: Timestamp | null;
  start_time: Timestamp | null;
  finish_time: Timestamp | null;
  update_time: Timestamp | null;
  cancel_requested: boolean;
  pause_requested: boolean;
  /** JSON text; `''` unless the task succeeded. */
  output: string;
  /** uint64 as a decimal string. */
  last_event_seq: string;
  /** 0 to 1, as the current step last reported it. */
  progress: number;
  progress_message: string;
  /** For a queued task with an estimate; otherwise null. */
  estimated_wait: Duration | null;
  queue_position: number;
  can_cancel: boolean;
  /** The pending approval, if any. */
  approval: ApprovalRequest | null;
  /** For a task waiting to retry a failed step: when the next attempt is due. */
  next_attempt_time: Timestamp | null;
  /** Why the next step waits beyond its turn (open breaker, governor hold); empty otherwise. */
  waiting_for: string;
}

/** The values of `sluice.v1.ApprovalTimeoutAction`, in number order. */
export const APPROVAL_TIMEOUT_ACTION_VALUES = [
  'APPROVAL_TIMEOUT_ACTION_UNSPECIFIED',
  'APPROVAL_TIMEOUT_ACTION_PAUSE',
  'APPROVAL_TIMEOUT_ACTION_CANCEL',
] as const;
export type ApprovalTimeoutAction = (typeof APPROVAL_TIMEOUT_ACTION_VALUES)[number];

/** `sluice.v1.ApprovalRequest`. */
export interface ApprovalRequest {
  prompt: string;
  step: string;
  deadline: Timestamp | null;
  on_timeout: ApprovalTimeoutAction;
}

/** `sluice.v1.TaskEvent`. */
export interface TaskEvent {
  task_id: string;
  /** uint64 as a decimal string. */
  seq: string;
  type: string;
  from_status: TaskStatus;
  to_status: TaskStatus;
  step: string;
  create_time: Timestamp | null;
  /** JSON text, or `''`. */
  data: string;
}

/** `sluice.v1.CreateTaskRequest`, as received. */
export interface CreateTaskRequest {
  type: string;
  priority: ReceivedEnum<Priority>;
  /** JSON text, unvalidated. */
  input: string;
  idempotency_key: string;
}

/** `sluice.v1.CreateTaskResponse`. */
export interface CreateTaskResponse {
  task: Task;
  created: boolean;
}

/** `sluice.v1.CreateTasksRequest`, as received. */
export interface CreateTasksRequest {
  tasks: CreateTaskRequest[];
}

/** `sluice.v1.CreateTasksResponse`: one result per requested task, in request order. */
export interface CreateTasksResponse {
  results: CreateTaskResponse[];
}

/** `sluice.v1.GetTaskRequest`, as received. */
export interface GetTaskRequest {
  task_id: string;
}

/** `sluice.v1.GetTaskResponse`. */
export interface GetTaskResponse {
  task: Task;
}

/** `sluice.v1.WatchTaskRequest`, as received. */
export interface WatchTaskRequest {
  task_id: string;
  /** uint64 as a decimal string; `'0'` for the whole history. */
  after_seq: string;
}

/** `sluice.v1.WatchTaskResponse`: one message of the stream. */
export interface WatchTaskResponse {
  event: TaskEvent;
}

/** `sluice.v1.ListTasksRequest`, as received. */
export interface ListTasksRequest {
  page_size: number;
  page_token: string;
  /** `'TASK_STATUS_UNSPECIFIED'` for all states. */
  status: ReceivedEnum<TaskStatus>;
  /** `''` for all types. */
  type: string;
  /** `'PRIORITY_UNSPECIFIED'` for all priorities. */
  priority: ReceivedEnum<Priority>;
  /** Unset (null) for no bound. */
  created_after: Timestamp | null;
  created_before: Timestamp | null;
}

/** `sluice.v1.ListTasksResponse`. */
export interface ListTasksResponse {
  tasks: Task[];
  /** `''` on the last page. */
  next_page_token: string;
}

/** `sluice.v1.CancelTaskRequest`, as received. */
export interface CancelTaskRequest {
  task_id: string;
  reason: string;
}

/** `sluice.v1.CancelTaskResponse`. */
export interface CancelTaskResponse {
  task: Task;
}

/** `sluice.v1.ApproveTaskRequest`, as received. */
export interface ApproveTaskRequest {
  task_id: string;
  approved: boolean;
  comment: string;
}

/** `sluice.v1.ApproveTaskResponse`. */
export interface ApproveTaskResponse {
  task: Task;
}

/** `sluice.v1.PauseTaskRequest`, as received. */
export interface PauseTaskRequest {
  task_id: string;
}

/** `sluice.v1.PauseTaskResponse`. */
export interface PauseTaskResponse {
  task: Task;
}

/** `sluice.v1.ResumeTaskRequest`, as received. */
export interface ResumeTaskRequest {
  task_id: string;
}

/** `sluice.v1.ResumeTaskResponse`. */
export interface ResumeTaskResponse {
  task: Task;
}

/** `sluice.v1.RetryTaskRequest`, as received. */
export interface RetryTaskRequest {
  task_id: string;
}

/** `sluice.v1.RetryTaskResponse`. */
export interface RetryTaskResponse {
  task: Task;
}

const MS_PER_SECOND = 1000;
const NANOS_PER_MS = 1_000_000;

/**
 * Converts a `Date` to a {@link Timestamp} (millisecond precision, like `Date`).
 *
 * @throws RangeError for an invalid date.
 */
export function toTimestamp(date: Date): Timestamp {
  const ms = date.getTime();
  if (!Number.isFinite(ms)) throw new RangeError('cannot convert an invalid Date to a Timestamp');
  const seconds = Math.floor(ms / MS_PER_SECOND);
  return { seconds: String(seconds), nanos: (ms - seconds * MS_PER_SECOND) * NANOS_PER_MS };
}

/** `google.protobuf.Timestamp`'s range: 0001-01-01T00:00:00Z … 9999-12-31T23:59:59Z, in seconds. */
const MIN_TIMESTAMP_SECONDS = -62_135_596_800;
const MAX_TIMESTAMP_SECONDS = 253_402_300_799;
const MAX_NANOS = 999_999_999;

/**
 * Converts a {@link Timestamp} back to a `Date`, truncating to milliseconds.
 *
 * @throws RangeError when `seconds` is not an integer or `nanos` not one of 0 … 999,999,999, or
 *   when the time is outside `google.protobuf.Timestamp`'s range (years 1 to 9999): past it a
 *   `Date` is invalid or Postgres cannot store the time.
 */
export function fromTimestamp(timestamp: Timestamp): Date {
  const seconds = Number(timestamp.seconds);
  if (
    !Number.isSafeInteger(seconds) ||
    seconds < MIN_TIMESTAMP_SECONDS ||
    seconds > MAX_TIMESTAMP_SECONDS
  ) {
    throw new RangeError(`invalid Timestamp seconds "${timestamp.seconds}"`);
  }
  const { nanos } = timestamp;
  if (!Number.isInteger(nanos) || nanos < 0 || nanos > MAX_NANOS) {
    throw new RangeError(`invalid Timestamp nanos ${nanos}`);
  }
  return new Date(seconds * MS_PER_SECOND + Math.floor(nanos / NANOS_PER_MS));
}

/**
 * Whether `date` is a valid time within `google.protobuf.Timestamp`'s range (years 1 to 9999):
 * what every stored time is, and what Postgres can compare with (a page token's time is checked so).
 */
export function isWithinTimestampRange(date: Date): boolean {
  const ms = date.getTime();
  return (
    ms >= MIN_TIMESTAMP_SECONDS * MS_PER_SECOND &&
    ms <= MAX_TIMESTAMP_SECONDS * MS_PER_SECOND + (MS_PER_SECOND - 1)
  );
}

/** Converts milliseconds to a {@link Duration} (millisecond precision). */
export function toDuration(ms: number): Duration {
  if (!Number.isFinite(ms))
    throw new RangeError('cannot convert a non-finite number to a Duration');
  const whole = Math.trunc(ms);
  const seconds = Math.trunc(whole / MS_PER_SECOND);
  return { seconds: String(seconds), nanos: (whole - seconds * MS_PER_SECOND) * NANOS_PER_MS };
}

/** Converts a {@link Duration} to milliseconds. */
export function fromDuration(duration: Duration): number {
  return Number(duration.seconds) * MS_PER_SECOND + Math.trunc(duration.nanos / NANOS_PER_MS);
}

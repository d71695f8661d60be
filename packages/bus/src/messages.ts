/**
 * The messages Sluice sends over NATS, their JSON codec and hand-written validators.
 *
 * Messages carry ids and small metadata, never task payloads: the record is in Postgres, and a
 * message only says where to look. Every message has a `type`, so a receiver can `switch` on it.
 * Decoding validates every field and returns a fresh object holding only the known fields (unknown
 * fields from a newer sender are dropped, not trusted).
 */
import { isPriority, resourceProblem, SluiceError, tenantIdProblem } from '@sluice/core';
import type { NameProblem, Priority } from '@sluice/core';
import { taskIdTokenProblem } from './catalog.js';

/** The scheduler admitted a step: run dispatch number `dispatch` of step `step_seq` of a task. */
export interface StepDispatch {
  readonly type: 'step.dispatch';
  readonly task_id: string;
  /** The step's sequence number within its task. */
  readonly step_seq: number;
  /** Which dispatch of this step this is (1, 2, … — a re-dispatch gets a new number). */
  readonly dispatch: number;
  readonly tenant_id: string;
  readonly priority: Priority;
  readonly resource: string;
}

/** A step outcome was recorded in Postgres (a wake-up for the scheduler, not the record). */
export interface StepResult {
  readonly type: 'step.result';
  readonly task_id: string;
  readonly step_seq: number;
  /**
   * The executor's write applied the outcome too (a usual outcome: completion, continuation,
   * fan-out, a branch's completion), so the scheduler's outcome pass has nothing to do for it;
   * `resource`, the step's, is where the scheduler counts the attempt in its retry budget.
   */
  readonly applied?: { readonly resource: string };
}

/** Something changed; the receiver should look at Postgres now rather than at its next poll. */
export interface Wake {
  readonly type: 'wake';
  /** Why, for logs (e.g. `task.created`). */
  readonly reason: string;
  /**
   * The ready step that prompted it, when there is one (a created task's first step): the
   * dispatcher need not look when that step's resource is full and the step is not P0 (see the
   * scheduler's full-resources.ts). Both fields or neither. `dispatched`: the gateway claimed and
   * published that step itself (its urgent claim), so no admission pass is needed for it; the
   * scheduler still notes the P0 work for its urgent-wait guard.
   */
  readonly step?: {
    readonly resource: string;
    readonly priority: Priority;
    readonly dispatched?: true;
  };
}

/** Abort the running step(s) of a task: it was cancelled. */
export interface CancelRequest {
  readonly type: 'task.cancel';
  readonly task_id: string;
}

/** One `task_events` row, as the event relay publishes it and the gateway forwards it to watchers. */
export interface TaskEventNotice {
  readonly type: 'task.event';
  readonly task_id: string;
  readonly tenant_id: string;
  /** The event's per-task sequence number (1, 2, …); subscribers de-duplicate by it. */
  readonly seq: number;
  /** What happened, e.g. `create` or `step_done`. */
  readonly event: string;
  readonly from_status: string | null;
  readonly to_status: string | null;
  /** The step concerned, if any. */
  readonly step: string | null;
  /** When the event was recorded, as an ISO 8601 time. */
  readonly at: string;
}

/** Every message Sluice sends over NATS. */
export type BusMessage = StepDispatch | StepResult | Wake | CancelRequest | TaskEventNotice;

/** The `type` values of {@link BusMessage}. */
export const BusMessageType = {
  StepDispatch: 'step.dispatch',
  StepResult: 'step.result',
  Wake: 'wake',
  CancelRequest: 'task.cancel',
  TaskEventNotice: 'task.event',
} as const;
export type BusMessageType = BusMessage['type'];

/** The message of one `type`. */
export type BusMessageOf<T extends BusMessageType> = Extract<BusMessage, { type: T }>;

/** Largest encoded message accepted by {@link decodeMessage} (messages carry ids only). */
export const MAX_MESSAGE_BYTES = 16 * 1024;
/** Longest free-text field (wake reasons, event names, statuses, step names). */
const MAX_TEXT = 256;

/**
 * A message that cannot be encoded or decoded: not JSON, an unknown `type`, or a field that fails
 * validation. Its `code` is `invalid_argument`; a consumer should terminate (not retry) such a
 * message, since redelivering the same bytes cannot fix it.
 */
export class BusMessageError extends SluiceError {
  /** The subject the message came from (`undefined` when encoding). */
  readonly subject: string | undefined;
  /** What is wrong, e.g. `step_seq must be an integer ≥ 0`. */
  readonly reason: string;

  constructor(subject: string | undefined, reason: string, options: { cause?: unknown } = {}) {
    super(
      'invalid_argument',
      subject === undefined
        ? `invalid bus message: ${reason}`
        : `invalid bus message on ${subject}: ${reason}`,
      options,
    );
    this.subject = subject;
    this.reason = reason;
  }
}

/** True for a {@link BusMessageError} (by shape, so it holds across module copies). */
export function isBusMessageError(error: unknown): error is BusMessageError {
  return (
    error instanceof Error &&
    (error as { code?: unknown }).code === 'invalid_argument' &&
    typeof (error as { reason?: unknown }).reason === 'string' &&
    'subject' in error
  );
}

/** Thrown inside validation; turned into a {@link BusMessageError} by the caller. */
class Invalid extends Error {}

type Fields = Readonly<Record<string, unknown>>;

function nameField(obj: Fields, field: string, problem: (v: unknown) => NameProblem): string {
  const p = problem(obj[field]);
  if (p !== undefined) throw new Invalid(`${field}: ${p}`);
  return obj[field] as string;
}

function intField(obj: Fields, field: string, min: number): number {
  const v = obj[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new Invalid(`${field} must be an integer ≥ ${min}`);
  }
  return v;
}

function textField(obj: Fields, field: string): string {
  const v = obj[field];
  if (typeof v !== 'string' || v.length === 0 || v.length > MAX_TEXT) {
    throw new Invalid(`${field} must be a non-empty string of at most ${MAX_TEXT} characters`);
  }
  return v;
}

function nullableTextField(obj: Fields, field: string): string | null {
  // A missing field means null; anything else must be a proper string.
  return obj[field] === null || obj[field] === undefined ? null : textField(obj, field);
}

function timeField(obj: Fields, field: string): string {
  const v = obj[field];
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T/.test(v) || Number.isNaN(Date.parse(v))) {
    throw new Invalid(`${field} must be an ISO 8601 time`);
  }
  return v;
}

function priorityField(obj: Fields, field: string): Priority {
  const v = obj[field];
  if (!isPriority(v)) throw new Invalid(`${field} must be 0, 1, 2 or 3`);
  return v;
}

function readyStepField(obj: Fields, field: string): NonNullable<Wake['step']> {
  const v = obj[field];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new Invalid(`${field} must be an object with resource and priority`);
  }
  const step = v as Fields;
  const ready = {
    resource: nameField(step, 'resource', resourceProblem),
    priority: priorityField(step, 'priority'),
  };
  if (step.dispatched === undefined || step.dispatched === false) return ready;
  if (step.dispatched !== true) throw new Invalid(`${field}.dispatched must be a boolean`);
  return { ...ready, dispatched: true };
}

function appliedField(obj: Fields, field: string): { resource: string } {
  const v = obj[field];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new Invalid(`${field} must be an object`);
  }
  return { resource: nameField(v as Fields, 'resource', resourceProblem) };
}

/** Validates a parsed object and rebuilds it with only the known fields. */
function validate(obj: Fields): BusMessage {
  const type = obj.type;
  switch (type) {
    case 'step.dispatch':
      return {
        type,
        task_id: nameField(obj, 'task_id', taskIdTokenProblem),
        step_seq: intField(obj, 'step_seq', 0),
        dispatch: intField(obj, 'dispatch', 1),
        tenant_id: nameField(obj, 'tenant_id', tenantIdProblem),
        priority: priorityField(obj, 'priority'),
        resource: nameField(obj, 'resource', resourceProblem),
      };
    case 'step.result': {
      const result = {
        type,
        task_id: nameField(obj, 'task_id', taskIdTokenProblem),
        step_seq: intField(obj, 'step_seq', 0),
      };
      return obj.applied === undefined
        ? result
        : { ...result, applied: appliedField(obj, 'applied') };
    }
    case 'wake':
      return obj.step === undefined
        ? { type, reason: textField(obj, 'reason') }
        : { type, reason: textField(obj, 'reason'), step: readyStepField(obj, 'step') };
    case 'task.cancel':
      return { type, task_id: nameField(obj, 'task_id', taskIdTokenProblem) };
    case 'task.event':
      return {
        type,
        task_id: nameField(obj, 'task_id', taskIdTokenProblem),
        tenant_id: nameField(obj, 'tenant_id', tenantIdProblem),
        seq: intField(obj, 'seq', 1),
        event: textField(obj, 'event'),
        from_status: nullableTextField(obj, 'from_status'),
        to_status: nullableTextField(obj, 'to_status'),
        step: nullableTextField(obj, 'step'),
        at: timeField(obj, 'at'),
      };
    default:
      throw new Invalid(`unknown message type ${JSON.stringify(type)}`);
  }
}

function checked(subject: string | undefined, value: unknown): BusMessage {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new BusMessageError(subject, 'not a JSON object');
  }
  try {
    return validate(value as Fields);
  } catch (err) {
    if (err instanceof Invalid) throw new BusMessageError(subject, err.message);
    throw err;
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Validates a message and encodes it as UTF-8 JSON.
 *
 * @throws BusMessageError when a field is invalid: a bug at the sender, caught before it reaches a
 *   consumer.
 */
export function encodeMessage(message: BusMessage): Uint8Array {
  return encoder.encode(JSON.stringify(checked(undefined, message)));
}

/**
 * Decodes and validates a message of any type.
 *
 * @param subject where it came from, for the error message
 * @throws BusMessageError for malformed input
 */
export function decodeMessage(subject: string, data: Uint8Array): BusMessage {
  if (data.byteLength > MAX_MESSAGE_BYTES) {
    throw new BusMessageError(subject, `larger than ${MAX_MESSAGE_BYTES} bytes`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(data));
  } catch (err) {
    throw new BusMessageError(subject, 'not UTF-8 JSON', { cause: err });
  }
  return checked(subject, parsed);
}

/**
 * Decodes a message that must be of one type (e.g. `step.dispatch` on a step subject).
 *
 * @throws BusMessageError for malformed input or another type
 */
export function decodeMessageOf<T extends BusMessageType>(
  type: T,
  subject: string,
  data: Uint8Array,
): BusMessageOf<T> {
  const message = decodeMessage(subject, data);
  if (message.type !== type) {
    throw new BusMessageError(subject, `expected a ${type} message, got ${message.type}`);
  }
  return message as BusMessageOf<T>;
}

function ensureTaskId(taskId: string): void {
  const problem = taskIdTokenProblem(taskId);
  if (problem !== undefined) {
    throw new SluiceError('invalid_argument', problem, { field: 'task_id' });
  }
}

function ensureInt(value: number, min: number, field: string): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new SluiceError('invalid_argument', `${field} must be an integer ≥ ${min}`, { field });
  }
}

/**
 * The JetStream message id (`Nats-Msg-Id`) of one dispatch: `<task>:<step_seq>:<dispatch>`. A
 * publisher retrying the same dispatch reuses it, so the stream stores it once; a re-dispatch has a
 * new dispatch number and is never swallowed by the duplicate window. (Task ids cannot contain `:`,
 * so the id is unambiguous.)
 *
 * @throws SluiceError `invalid_argument` for a malformed task id or number
 */
export function dispatchMsgId(taskId: string, stepSeq: number, dispatch: number): string {
  ensureTaskId(taskId);
  ensureInt(stepSeq, 0, 'step_seq');
  ensureInt(dispatch, 1, 'dispatch');
  return `${taskId}:${stepSeq}:${dispatch}`;
}

/**
 * The JetStream message id of one task event notice: `<task>:e<seq>`. The relay may publish an event
 * again after a crash; the events stream then stores it once.
 *
 * @throws SluiceError `invalid_argument` for a malformed task id or sequence
 */
export function eventMsgId(taskId: string, seq: number): string {
  ensureTaskId(taskId);
  ensureInt(seq, 1, 'seq');
  return `${taskId}:e${seq}`;
}

/**
 * Turns whatever a step handler threw into a stored step error with its class. The full retry
 * policy per class is the scheduler's; here we only name what happened.
 */
import {
  isRetryableClass,
  storableText,
  type ErrorClass,
  type SerializedStepError,
} from '@sluice/core';
import { scrubSecrets } from '@sluice/telemetry';

/** Why a step's abort signal fired. */
export type AbortReason = 'cancelled' | 'timeout';

/**
 * What a step's signal aborts with: says why in `abortReason`, so what is given the signal (the
 * LLM client) tells a timeout from a cancel by type. Named as the platform names its aborts
 * (`AbortSignal.timeout()` aborts with a `TimeoutError`, `abort()` with an `AbortError`).
 */
export class StepAbortError extends Error {
  override readonly name: 'TimeoutError' | 'AbortError';

  constructor(
    readonly abortReason: AbortReason,
    message = abortReason === 'timeout' ? 'step timed out' : 'task cancelled',
  ) {
    super(message);
    this.name = abortReason === 'timeout' ? 'TimeoutError' : 'AbortError';
  }
}

/**
 * Classifies `error`. `aborted` says whether (and why) the step's signal fired: an error thrown
 * after a cancel is a cancellation, after the timeout a timeout, whatever its own type.
 *
 * A handler may throw a value of any shape, so nothing here throws in turn: a field whose getter
 * throws counts as absent, and a value that cannot be made text is named by its type. (A throw
 * here failed the whole run: the message went back with the step left running, and the handler ran
 * again on each redelivery.)
 */
export function classifyStepError(
  error: unknown,
  aborted: AbortReason | undefined,
): SerializedStepError {
  const message = withCauses(error, thrownMessage(error));
  const errorClass = classOf(error, aborted);
  const retryAfterMs = numberField(error, 'retryAfterMs');
  return {
    errorClass,
    message: stepErrorMessage(message),
    retryable: isRetryableClass(errorClass) && !isFinalClientError(error),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  };
}

/** The longest stored step error message, in UTF-16 units. */
const MAX_MESSAGE_UNITS = 2_000;

/**
 * How much of a longer message is scrubbed before the cut: a credential that starts before the
 * cut is still recognised by what follows it (a URL's password by its `@`), while a huge message
 * is not scanned whole.
 */
const SCRUBBED_UNITS = 2 * MAX_MESSAGE_UNITS;

/**
 * A step failure's message as it is stored: credentials in it replaced as in log lines (a bearer
 * token, a URL's password or `?api_key=`, which a tool's error often quotes: see scrubSecrets),
 * then its first 2,000 UTF-16 units, storable (see storableText). It goes into the step's outcome,
 * the task's error, its `step_failed` event, a dead letter and a repair step's input — read by
 * anyone who may read the task — whatever the failure: a thrown error or a result Sluice refuses,
 * whose message may quote a value of any length. Scrubbed before the cut, as a replacement may be
 * longer than what it hides.
 */
export function stepErrorMessage(message: string): string {
  const scrubbed = scrubSecrets(message.slice(0, SCRUBBED_UNITS));
  return storableText(scrubbed.slice(0, MAX_MESSAGE_UNITS));
}

/**
 * An HTTP answer that asking again will not change (400, 404, 422 …): the request itself is wrong.
 * 408 (timeout), 409 (conflict), 425 (too early) and 429 (rate limit) may pass on a later try.
 */
function isFinalClientError(error: unknown): boolean {
  const status = numberField(error, 'status');
  if (nameOf(error) !== 'HttpStatusError' || status === undefined) {
    return false;
  }
  return status >= 400 && status < 500 && ![408, 409, 425, 429].includes(status);
}

function classOf(error: unknown, aborted: AbortReason | undefined): ErrorClass {
  if (aborted === 'cancelled') return 'cancelled';
  if (aborted === 'timeout') return 'tool_timeout';
  const name = nameOf(error);
  const status = numberField(error, 'status');
  if (name === 'HttpStatusError' && status !== undefined) {
    if (status === 429) return 'llm_rate_limit';
    if (status === 408) return 'tool_timeout';
    if (status === 401 || status === 403) return 'permission_denied';
    if (status >= 500) return 'external_5xx';
    return 'unknown';
  }
  if (name === 'ZodError') return 'schema_validation';
  if (name === 'TimeoutError') return 'tool_timeout';
  return 'unknown';
}

/**
 * What a thrown value says, as text: an error's message (or its `toString` when the message is not
 * text), another object's `message` text or else its JSON (a thrown `{ message }` or error body,
 * which `String` shows as `[object Object]`), anything else as `String` makes it. Never throws: a
 * value that cannot be read or made text (an object without a prototype, a getter or `toString`
 * that throws) is named by its type.
 */
export function thrownMessage(error: unknown): string {
  const message = readField(error, 'message');
  if (typeof message === 'string') return message;
  let text: string;
  try {
    text = String(error);
  } catch {
    return `a thrown ${typeof error} that cannot be shown as text`;
  }
  if (text !== '[object Object]') return text;
  try {
    return JSON.stringify(error) ?? text;
  } catch {
    return text; // a cycle, a bigint
  }
}

/** Causes followed at most, so a long or cyclic chain stays short. */
const MAX_CAUSES = 3;

/**
 * `message` followed by what the error's causes say (`fetch failed: connect ECONNREFUSED …`):
 * Node's fetch rejects with "fetch failed" for every network failure and keeps why in `cause`,
 * which the user, reading only the message, never saw. A cause the text already holds is not
 * repeated.
 */
function withCauses(error: unknown, message: string): string {
  let text = message;
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES; depth += 1) {
    current = readField(current, 'cause');
    if (current === undefined || current === null || current === error) break;
    const cause = causeText(current);
    if (cause !== '' && !text.includes(cause)) text = `${text}: ${cause}`;
  }
  return text;
}

/** Errors of an AggregateError named at most. */
const MAX_AGGREGATED = 3;

/**
 * What a cause says: its message, or when that is empty (Node's AggregateError of a connection to
 * every address of a host, its `code` set) the messages of its errors, else its `code`.
 */
function causeText(cause: unknown): string {
  const message = thrownMessage(cause);
  if (message !== '') return message;
  const errors = readField(cause, 'errors');
  try {
    if (Array.isArray(errors)) {
      const messages = errors
        .slice(0, MAX_AGGREGATED)
        .map((error) => thrownMessage(error))
        .filter((text) => text !== '');
      if (messages.length > 0) return messages.join('; ');
    }
  } catch {
    // an array whose items cannot be read: its code, if any
  }
  const code = readField(cause, 'code');
  return typeof code === 'string' ? code : '';
}

/** `error.name` of an Error, else undefined. */
function nameOf(error: unknown): unknown {
  return isError(error) ? readField(error, 'name') : undefined;
}

function isError(error: unknown): error is Error {
  try {
    return error instanceof Error; // a proxy's getPrototypeOf may throw
  } catch {
    return false;
  }
}

function numberField(error: unknown, field: string): number | undefined {
  const value = readField(error, field);
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** `error[field]`, or undefined when `error` is no object or reading the field throws. */
function readField(error: unknown, field: string): unknown {
  if (typeof error !== 'object' || error === null) return undefined;
  try {
    return (error as Record<string, unknown>)[field];
  } catch {
    return undefined;
  }
}

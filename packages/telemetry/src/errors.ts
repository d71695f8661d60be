/**
 * What logs and spans say of an error.
 *
 * A failed drizzle query throws `DrizzleQueryError`: its message (and so its stack) is
 * `Failed query: <statement>\nparams: <every parameter>`, and it carries the same as its `query`
 * and `params` fields, with the driver's error as `cause`. The parameters are a task's input, a
 * step's output, an API key's hash: logs and spans report the driver's error instead (its code,
 * message and SQLSTATE fields say what went wrong).
 */
import { UNREADABLE } from './redaction.js';

/**
 * Whether `error` is shaped as drizzle's `DrizzleQueryError` (this package does not use drizzle):
 * an error with a string `query`, an array `params` and an error as `cause`.
 */
export function isQueryError(error: unknown): error is Error & { readonly cause: Error } {
  if (!(error instanceof Error)) return false;
  try {
    const { query, params, cause } = error as {
      query?: unknown;
      params?: unknown;
      cause?: unknown;
    };
    return cause instanceof Error && typeof query === 'string' && Array.isArray(params);
  } catch {
    // A getter that throws: not drizzle's error, whose fields are plain.
    return false;
  }
}

/** What to report of `thrown`: the driver's error for a failed query (see above), else itself. */
export function reportedError(thrown: unknown): unknown {
  let error = thrown;
  // A bound: a cause chain may be circular.
  for (let depth = 0; depth < 8 && isQueryError(error); depth++) error = error.cause;
  return error;
}

/** An error as pino's `err` serializer takes one: anything with a string `message`. */
type ErrorLike = Record<string, unknown> & { message: string; stack?: unknown };

function isErrorLike(value: unknown): value is ErrorLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { message?: unknown }).message === 'string'
  );
}

/** How many causes the message and stack follow, as a chain may be circular or endless. */
const MAX_CAUSES = 8;

/**
 * The logger's `err` serializer: pino's (`type`, `message` and `stack` followed through the
 * causes, `aggregateErrors`, the error's enumerable fields), but a failed query anywhere in the
 * error or its causes is written as the driver's error it wraps (see above), so neither its text
 * nor its `query` and `params` fields reach the line.
 */
export function serializeError(value: unknown): unknown {
  try {
    return isErrorLike(value) ? serialize(value, new Set()) : value;
  } catch {
    // A log call must not throw for what it is given (a getter that throws, a `cause()` that does).
    return UNREADABLE;
  }
}

function serialize(thrown: ErrorLike, seen: Set<unknown>): Record<string, unknown> {
  const error = reportedError(thrown) as ErrorLike;
  seen.add(thrown);
  seen.add(error);
  const constructor = error.constructor as unknown;
  const serialized: Record<string, unknown> = {
    type: typeof constructor === 'function' ? constructor.name : error.name,
    message: messageWithCauses(error),
    stack: stackWithCauses(error),
  };
  if (Array.isArray(error.errors)) {
    serialized.aggregateErrors = error.errors.map((inner: unknown) =>
      isErrorLike(inner) && !seen.has(inner) ? serialize(inner, seen) : inner,
    );
  }
  for (const key in error) {
    // The cause is in the message and stack already.
    if (key === 'cause' || serialized[key] !== undefined) continue;
    const field = error[key];
    if (!isErrorLike(field)) serialized[key] = field;
    else if (!seen.has(field)) serialized[key] = serialize(field, seen);
  }
  return serialized;
}

/** The error a reported error was caused by, itself reported: `undefined` at the chain's end. */
function causeOf(error: ErrorLike): ErrorLike | undefined {
  // VError's `cause()` is a method.
  const cause = typeof error.cause === 'function' ? (error.cause as () => unknown)() : error.cause;
  const reported = reportedError(cause);
  return isErrorLike(reported) ? reported : undefined;
}

/** `message: cause's message: …`, as pino writes it. */
function messageWithCauses(error: ErrorLike): string {
  let text = error.message;
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES; depth++) {
    const cause = causeOf(current);
    if (cause === undefined) return text;
    // VError puts its causes' messages in its own already.
    if (typeof current.cause !== 'function') text += `: ${cause.message}`;
    current = cause;
  }
  return `${text}: ...`;
}

/** The stack, then `caused by: <the cause's stack>` for each cause, as pino writes it. */
function stackWithCauses(error: ErrorLike): string {
  let text = typeof error.stack === 'string' ? error.stack : '';
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES; depth++) {
    const cause = causeOf(current);
    if (cause === undefined) return text;
    text += `\ncaused by: ${typeof cause.stack === 'string' ? cause.stack : ''}`;
    current = cause;
  }
  return `${text}\ncauses have become circular...`;
}

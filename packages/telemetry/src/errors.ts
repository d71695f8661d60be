/**
 * What logs and spans say of an error.
 *
 * A failed drizzle query throws `DrizzleQueryError`: its message (and so its stack) is
 * `Failed query: <statement>\nparams: <every parameter>`, and it carries the same as its `query`
 * and `params` fields, with the driver's error as `cause`. The parameters are a task's input, a
 * step's output, an API key's hash: logs and spans report the driver's error instead (its code,
 * message and SQLSTATE fields say what went wrong).
 */
import { UNREADABLE, redactSecrets } from './redaction.js';

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

/**
 * How many characters of one error's message a log line keeps, wherever it is written (the `err`
 * field's message, where its stack repeats it, `msg`), and of each string field of the error. Why a
 * bound: a handler's error may quote a whole response body or document, and a line of megabytes is
 * written in one piece, held whole by the log shipper, and split or refused by most log pipelines
 * (Docker's json-file driver splits a line at 16 KiB); 4 KiB keeps what a person reads.
 */
export const ERROR_TEXT_LIMIT = 4096;

/**
 * How many characters of the message and of the stack, each with its causes', a log line keeps:
 * several messages and their stack frames (a frame is ~100 characters) within a 16 KiB line.
 */
export const ERROR_CHAIN_TEXT_LIMIT = 12_288;

/** The first `limit` characters of `text`, without half of a surrogate pair at the end. */
export function cutText(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const last = text.charCodeAt(limit - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? limit - 1 : limit);
}

/** `text` cut to `limit` with a mark saying how much was cut, so a reader knows it was. */
function bounded(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const kept = cutText(text, limit);
  return `${kept}… [${text.length - kept.length} characters cut]`;
}

/** The message of an error as a log line's `msg` shows it: the reported error's, bounded. */
export function loggedMessage(error: Error): string | undefined {
  const reported = reportedError(error);
  return reported instanceof Error ? bounded(reported.message, ERROR_TEXT_LIMIT) : undefined;
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
 * causes, `aggregateErrors`, the error's enumerable fields, these with their secrets censored by
 * name as a logged object's are), but a failed query anywhere in the error or its causes is written
 * as the driver's error it wraps (see above), so neither its text nor its `query` and `params`
 * fields reach the line.
 */
export function serializeError(value: unknown): unknown {
  try {
    if (isErrorLike(value)) return serialize(value, new Set());
    // A thrown string (`throw await response.text()`) is bounded as an error's message is.
    return typeof value === 'string' ? bounded(value, ERROR_TEXT_LIMIT) : value;
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
    message: bounded(messageWithCauses(error), ERROR_CHAIN_TEXT_LIMIT),
    stack: bounded(stackWithCauses(error), ERROR_CHAIN_TEXT_LIMIT),
  };
  if (Array.isArray(error.errors)) {
    serialized.aggregateErrors = error.errors.map((inner: unknown) =>
      isErrorLike(inner) && !seen.has(inner) ? serialize(inner, seen) : inner,
    );
  }
  for (const key in error) {
    // The cause is in the message and stack already.
    if (key === 'cause' || serialized[key] !== undefined) continue;
    let field: unknown;
    try {
      field = error[key];
    } catch {
      // One field that cannot be read (its getter throws) must not cost the line the message.
      serialized[key] = UNREADABLE;
      continue;
    }
    if (typeof field === 'string') serialized[key] = bounded(field, ERROR_TEXT_LIMIT);
    else if (!isErrorLike(field)) serialized[key] = field;
    else if (!seen.has(field)) serialized[key] = serialize(field, seen);
  }
  // The fields censored as a logged object's are (redaction.ts looks into no error): an HTTP
  // client's error carries the request it failed, headers and all.
  return redactSecrets(serialized);
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
  let text = bounded(error.message, ERROR_TEXT_LIMIT);
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES; depth++) {
    const cause = causeOf(current);
    if (cause === undefined) return text;
    // VError puts its causes' messages in its own already.
    if (typeof current.cause !== 'function')
      text += `: ${bounded(cause.message, ERROR_TEXT_LIMIT)}`;
    current = cause;
  }
  return `${text}: ...`;
}

/** The stack, then `caused by: <the cause's stack>` for each cause, as pino writes it. */
function stackWithCauses(error: ErrorLike): string {
  let text = stackOf(error);
  let current = error;
  for (let depth = 0; depth < MAX_CAUSES; depth++) {
    const cause = causeOf(current);
    if (cause === undefined) return text;
    text += `\ncaused by: ${stackOf(cause)}`;
    current = cause;
  }
  return `${text}\ncauses have become circular...`;
}

/**
 * The stack of `error` with its message (which V8 puts at the stack's head, after the name) cut as
 * the message is, so that the frames after a long message are kept.
 */
function stackOf(error: ErrorLike): string {
  const stack = typeof error.stack === 'string' ? error.stack : '';
  const { message } = error;
  if (message.length <= ERROR_TEXT_LIMIT) return stack;
  const at = stack.indexOf(message);
  if (at < 0) return stack;
  return stack.slice(0, at) + bounded(message, ERROR_TEXT_LIMIT) + stack.slice(at + message.length);
}

/**
 * `String(value)` for a thrown value that is not an error, without throwing: `String` throws for an
 * object without a prototype (`Object.create(null)`) or whose `toString` throws, and what reports a
 * failure must not fail in its place. Such a value is described by its tag (`[object Object]`).
 */
export function describeThrown(value: unknown): string {
  try {
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      // A revoked proxy.
      return UNREADABLE;
    }
  }
}

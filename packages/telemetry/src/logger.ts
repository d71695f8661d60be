/**
 * The pino logger factory every service uses.
 *
 * One JSON object per line on stdout: `level` as a label, an ISO `time`, the `service` name, and
 * the `trace_id` / `span_id` of the active span so a log line leads straight to its trace. Fields
 * that may hold secrets are censored before the line is written, and what still looks like a
 * credential in the finished line (a bearer token in an error message, a password in a URL, an API
 * key) is scrubbed as the line is written.
 */
import { hostname } from 'node:os';
import { context, isSpanContextValid, trace } from '@opentelemetry/api';
import { pino } from 'pino';
import type { DestinationStream, LogFn, Logger as PinoLogger } from 'pino';
import { loggedMessage, serializeError } from './errors.js';
import { stdoutDestination } from './log-destination.js';
import { REDACTED, SECRET_QUERY_PARAMS, UNREADABLE, redactSecrets } from './redaction.js';

/** A Sluice logger: pino's, so `child`, `isLevelEnabled` and the level methods are all there. */
export type Logger = PinoLogger;

/** The accepted log levels, most to least severe; `silent` turns logging off. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The level used when none is given. */
export const DEFAULT_LOG_LEVEL: LogLevel = 'info';

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** The service name bound to every line as `service`, e.g. `scheduler`. */
  service: string;
  /** The minimum level written; default {@link DEFAULT_LOG_LEVEL}. */
  level?: LogLevel;
  /**
   * Where lines go; default stdout, the lines of one event-loop turn in one write
   * ({@link stdoutDestination}). Tests pass a stream to read what was logged.
   */
  destination?: DestinationStream;
}

/** Whether `value` is one of {@link LOG_LEVELS}; use it to validate configuration. */
export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value);
}

/**
 * Creates the root logger of a service. Bind ids with child loggers
 * (`log.child({ task_id })`), log objects first and the message second, errors as `{ err }`.
 *
 * @throws RangeError when `level` is not one of {@link LOG_LEVELS} or `service` is empty.
 */
export function createLogger(options: LoggerOptions): Logger {
  const level: unknown = options.level ?? DEFAULT_LOG_LEVEL;
  if (!isLogLevel(level)) {
    throw new RangeError(`log level "${String(level)}" is not one of ${LOG_LEVELS.join(', ')}`);
  }
  if (options.service.length === 0) throw new RangeError('logger service name is required');

  const logger = pino(
    {
      level,
      base: { service: options.service, pid: process.pid, hostname: hostname() },
      timestamp: pino.stdTimeFunctions.isoTime,
      mixin: activeTraceIds,
      mixinMergeStrategy: mergeLogged,
      formatters: {
        // Labels read better than pino's numbers for people and log shippers alike.
        level: (label) => ({ level: label }),
        // Secrets by field name in what each call logs (see redaction.ts).
        log: redactSecrets,
      },
      // Errors as pino writes them, but a failed query as the driver's error (see errors.ts).
      serializers: { err: serializeError },
      hooks: { logMethod: messageOfLoggedError, streamWrite: scrubSecrets },
    },
    options.destination ?? stdoutDestination(),
  );
  // pino gives its `bindings` formatter the root's base only, never a child's bindings: those are
  // censored where they enter. A child is made from its parent's prototype chain, so every
  // descendant's `child` is this one too.
  // Taken off the logger unbound on purpose: it is called with the parent as `this` below.
  const makeChild = Reflect.get(logger, 'child') as unknown as MakeChild;
  const censoredChild: MakeChild = function (this, bindings, childOptions) {
    return makeChild.call(this, redactSecrets(bindings), childOptions);
  };
  logger.child = censoredChild as unknown as Logger['child'];
  return logger;
}

/** pino's `child`, called on the logger it makes a child of. */
type MakeChild = (
  this: Logger,
  bindings: Record<string, unknown>,
  options?: Parameters<Logger['child']>[1],
) => Logger;

/**
 * A log call given an error and no message (`log.error(err)`, `log.error({ err })`) is written
 * with the error's message, which pino takes before any serializer runs: for a failed query that is
 * its statement and parameters, and it may be megabytes long. The message is given here instead,
 * as the `err` field shows it (see errors.ts).
 */
function messageOfLoggedError(this: PinoLogger, args: Parameters<LogFn>, method: LogFn): void {
  const [first, message] = args as unknown[];
  if (args.length === 1 || message === undefined) {
    const error = first instanceof Error ? first : loggedErr(first);
    if (error !== undefined) {
      const text = loggedMessage(error);
      if (text !== undefined) {
        method.call(this, first instanceof Error ? { err: first } : (first as object), text);
        return;
      }
    }
  }
  method.apply(this, args);
}

/** The `err` of a logged object without a `msg` of its own, as pino takes the message from. */
function loggedErr(fields: unknown): Error | undefined {
  if (typeof fields !== 'object' || fields === null) return undefined;
  try {
    const { err, msg } = fields as { err?: unknown; msg?: unknown };
    return msg === undefined && err instanceof Error ? err : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A log call's fields over the mixin's ids, as pino merges them but field by field: pino's
 * `Object.assign` reads every field, and a getter that throws made the log call throw. Such a field
 * is written as {@link UNREADABLE}.
 */
function mergeLogged(mergeObject: object, mixinObject: object): object {
  const merged = mixinObject as Record<string, unknown>;
  const fields = mergeObject as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    try {
      merged[key] = fields[key];
    } catch {
      merged[key] = UNREADABLE;
    }
  }
  return merged;
}

/**
 * The ids of the active span, or nothing outside a span. A fresh object each call: pino merges
 * the log call's fields into what the mixin returns.
 */
function activeTraceIds(): { trace_id?: string; span_id?: string } {
  const spanContext = trace.getSpanContext(context.active());
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

/**
 * What redaction by field name cannot see: credentials inside text, such as an error message that
 * quotes the `Authorization` header, a connection URL with its password, or a key pasted into a
 * message. Each is replaced as the finished JSON line is written; the rest of the line is kept.
 * Stops at quotes and backslashes, so a match never runs past the end of a JSON string.
 */
const SECRET_TEXT: ReadonlyArray<readonly [RegExp, string]> = [
  // `Bearer <token>`, as HTTP clients quote the `Authorization` header.
  [/\b(Bearer)(\s+)[^\s"\\,;]+/gi, `$1$2${REDACTED}`],
  // `scheme://user:password@host`: the password of a database, NATS or proxy URL. Matched from the
  // `://` (the scheme is left as it is): matched from the scheme, each word of a long run of
  // dotted or dashed text (`a.b.c…`, a hyphenated slug) was scanned to the run's end, so a 20 kB
  // line took a second and a 100 kB one half a minute, blocking the process.
  [/(:\/\/[^\s/:@"\\]*:)[^\s/@"\\]+@/g, `$1${REDACTED}@`],
  // Sluice API keys (`slk_` and 32 characters; the 10-character `key_prefix` stays readable) and
  // the common `sk-…` form of LLM provider keys.
  [/\bslk_[A-Za-z0-9_-]{16,}/g, `slk_${REDACTED}`],
  [/\bsk-[A-Za-z0-9_-]{16,}/g, `sk-${REDACTED}`],
  // A credential in a URL's query string (`?api_key=…`, `&token=…`, a presigned URL's `sig`), as
  // many tool APIs take their key: a step's error quotes the URL it called. The names are those
  // the executor redacts from the URLs it records (SECRET_QUERY_PARAMS); a name must be whole
  // (`keyword=` is not `key=`).
  [
    new RegExp(
      `([?&](?:${[...SECRET_QUERY_PARAMS].map(escapeRegExp).join('|')})=)[^\\s&#"\\\\]+`,
      'gi',
    ),
    `$1${REDACTED}`,
  ],
];

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Replaces credentials found in the text of a finished log line (see {@link SECRET_TEXT}).
 * Exported for tests and for anything else that writes text operators read.
 */
export function scrubSecrets(line: string): string {
  let scrubbed = line;
  for (const [pattern, replacement] of SECRET_TEXT)
    scrubbed = scrubbed.replace(pattern, replacement);
  return scrubbed;
}

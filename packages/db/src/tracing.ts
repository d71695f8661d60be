/**
 * Database client spans: the `postgres` driver Sluice uses has no OpenTelemetry instrumentation,
 * so the statements that matter to a task's trace are wrapped by hand in a span that follows the
 * OpenTelemetry semantic conventions for (PostgreSQL) database client spans: kind CLIENT, named
 * after its `db.query.summary`, with `db.system.name=postgresql`, `db.namespace`,
 * `server.address` / `server.port`, and `error.type` (plus `db.response.status_code`, the SQLSTATE)
 * on failure. No query text, parameter or value is ever recorded: the summary is a fixed string the
 * call site gives.
 *
 * The span is a child of the context active when the work starts, so a transaction run inside a
 * task's span (the gateway's create span, an executor's dispatch context) lands in the task's
 * trace. It depends on `@opentelemetry/api` only: without a started SDK it records nothing.
 */
import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span } from '@opentelemetry/api';
import { DrizzleQueryError } from 'drizzle-orm';
import type { Database } from './client.js';

// The stable database and server attribute names, copied as `@sluice/telemetry` copies its own
// (this package does not depend on the semantic-conventions package).
/** `postgresql`. */
export const ATTR_DB_SYSTEM_NAME = 'db.system.name';
/** The database of the connection, e.g. `sluice`. */
export const ATTR_DB_NAMESPACE = 'db.namespace';
/** A low-cardinality summary of the statements, e.g. `UPDATE task_steps`; also the span name. */
export const ATTR_DB_QUERY_SUMMARY = 'db.query.summary';
/** The operation of a single statement, e.g. `UPDATE`. */
export const ATTR_DB_OPERATION_NAME = 'db.operation.name';
/** The table of a single statement, e.g. `task_steps`. */
export const ATTR_DB_COLLECTION_NAME = 'db.collection.name';
/** The SQLSTATE a failed statement ended with, e.g. `40001`. */
export const ATTR_DB_RESPONSE_STATUS_CODE = 'db.response.status_code';
/** The host of the database server, as the connection URL names it. */
export const ATTR_SERVER_ADDRESS = 'server.address';
/** The port of the database server. */
export const ATTR_SERVER_PORT = 'server.port';
/** The class of the failure: the SQLSTATE, the driver's or the socket's code, or the error name. */
const ATTR_ERROR_TYPE = 'error.type';

/** The instrumentation scope of the database spans. */
export const DATABASE_TRACER = '@sluice/db';

/** What a {@link withDatabaseSpan} span is about. */
export interface DatabaseOperation<T> {
  /**
   * The `db.query.summary` and span name: the operations and tables of the statements, in order,
   * as the conventions shape a summary (`{operation} {table}` …), e.g.
   * `INSERT tasks INSERT task_events INSERT task_event_outbox INSERT task_steps`. Fixed, never built
   * from values.
   */
  readonly summary: string;
  /** `db.operation.name`, only when the work is a single statement, e.g. `UPDATE`. */
  readonly operationName?: string;
  /** `db.collection.name`, only when the work is a single statement on one table. */
  readonly collectionName?: string;
  /** More attributes, set at the start (e.g. Sluice's own). */
  readonly attributes?: Attributes;
  /** Attributes taken from the result once the work succeeded, e.g. how many rows it claimed. */
  readonly resultAttributes?: (result: T) => Attributes;
  /**
   * Whether a successful result is worth a span; a failure always is. For polls that mostly find
   * nothing (the dispatcher's claim), so an idle loop does not leave a trace per poll.
   */
  readonly recordIf?: (result: T) => boolean;
}

/**
 * Runs `fn` (one query or one transaction of `db`) and records it as a database client span, a
 * child of the context active when it started. A failure is recorded (ERROR status, `error.type`,
 * the exception) and rethrown.
 *
 * The span is created once the work is over, with the times the work started and ended, so that
 * {@link DatabaseOperation.recordIf} can drop it. It is never active while `fn` runs: database spans
 * are leaves, and what `fn` logs keeps the span of its caller.
 *
 * @param db the pool the work runs on: its connection settings give the server attributes.
 */
export async function withDatabaseSpan<T>(
  db: Database,
  operation: DatabaseOperation<T>,
  fn: () => Promise<T>,
): Promise<T> {
  const parent = context.active();
  const startTime = now();
  let result: T;
  try {
    result = await fn();
  } catch (error) {
    const span = startDatabaseSpan(db, operation, parent, startTime);
    const failure = failureOf(error);
    span.setAttributes(failure);
    const recorded = recordedError(error);
    span.recordException(recorded instanceof Error ? recorded : String(recorded));
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: recorded instanceof Error ? recorded.message : String(recorded),
    });
    span.end(now());
    throw error;
  }
  const endTime = now();
  if (operation.recordIf?.(result) ?? true) {
    const span = startDatabaseSpan(db, operation, parent, startTime);
    if (operation.resultAttributes) span.setAttributes(operation.resultAttributes(result));
    span.end(endTime);
  }
  return result;
}

function startDatabaseSpan<T>(
  db: Database,
  operation: DatabaseOperation<T>,
  parent: Context,
  startTime: number,
): Span {
  return trace.getTracer(DATABASE_TRACER).startSpan(
    operation.summary,
    {
      kind: SpanKind.CLIENT,
      startTime,
      attributes: {
        ...connectionAttributes(db),
        [ATTR_DB_QUERY_SUMMARY]: operation.summary,
        ...(operation.operationName === undefined
          ? {}
          : { [ATTR_DB_OPERATION_NAME]: operation.operationName }),
        ...(operation.collectionName === undefined
          ? {}
          : { [ATTR_DB_COLLECTION_NAME]: operation.collectionName }),
        ...operation.attributes,
      },
    },
    parent,
  );
}

/** Epoch milliseconds with sub-millisecond precision, what the API takes as a span time. */
function now(): number {
  return performance.timeOrigin + performance.now();
}

/** The connection attributes of each pool, worked out once. */
const CONNECTIONS = new WeakMap<object, Attributes>();

/**
 * `db.system.name`, `db.namespace`, `server.address` and `server.port` of a pool, from the
 * settings its `postgres` client parsed out of the connection URL (with the `PG*` variables as
 * fallbacks) when the pool was opened. Never the user or the password. With several hosts the
 * server is unknown until a connection is made, so it is left out.
 */
export function connectionAttributes(db: Database): Attributes {
  const known = CONNECTIONS.get(db);
  if (known) return known;
  const options = (db as { $client?: { options?: ParsedConnection } }).$client?.options;
  const host = options?.host?.length === 1 ? options.host[0] : undefined;
  const port = options?.port?.length === 1 ? options.port[0] : undefined;
  const attributes: Attributes = {
    [ATTR_DB_SYSTEM_NAME]: 'postgresql',
    ...(options?.database ? { [ATTR_DB_NAMESPACE]: decode(options.database) } : {}),
    ...(host ? { [ATTR_SERVER_ADDRESS]: host.replace(/^\[(.*)\]$/, '$1') } : {}),
    ...(host && typeof port === 'number' && Number.isInteger(port)
      ? { [ATTR_SERVER_PORT]: port }
      : {}),
  };
  CONNECTIONS.set(db, attributes);
  return attributes;
}

/** The part of the `postgres` client's parsed options read here. */
interface ParsedConnection {
  readonly host?: readonly string[];
  readonly port?: readonly number[];
  readonly database?: string;
}

/** A database name from a URL path is still percent-encoded. */
function decode(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/**
 * The error a failure's span records: the driver's, not drizzle's wrapper around it, whose message
 * (and so its stack) is `Failed query: <statement>\nparams: <every parameter>` — a task's whole
 * input, a step's output — none of which a span may carry.
 */
function recordedError(error: unknown): unknown {
  if (!(error instanceof DrizzleQueryError)) return error;
  return error.cause ?? 'the query failed';
}

/** Causes followed at most (drizzle wraps the driver's error in its own). */
const MAX_DEPTH = 5;

/**
 * `error.type` of a failure: the SQLSTATE of a Postgres error (also `db.response.status_code`),
 * else the first string `code` along the causes (`CONNECT_TIMEOUT`, `ECONNREFUSED`, …), else the
 * error's name.
 */
function failureOf(error: unknown): Attributes {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_DEPTH && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') {
      return current.name === 'PostgresError'
        ? { [ATTR_ERROR_TYPE]: code, [ATTR_DB_RESPONSE_STATUS_CODE]: code }
        : { [ATTR_ERROR_TYPE]: code };
    }
    current = current.cause;
  }
  return { [ATTR_ERROR_TYPE]: error instanceof Error ? error.name : '_OTHER' };
}

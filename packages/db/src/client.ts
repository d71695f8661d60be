/**
 * Connections: one `postgres` pool per process, wrapped by drizzle with the Sluice schema.
 */
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import * as schema from './schema.js';

/**
 * The drizzle database of Sluice, with its pool (`$client`) for what drizzle cannot send, such as
 * a transaction whose `COMMIT` goes out with its statements (task-batch.ts).
 */
export type Database = PostgresJsDatabase<typeof schema> & { readonly $client: postgres.Sql };
/** A transaction of {@link Database}; queries accept either. */
export type Transaction = Parameters<Parameters<Database['transaction']>[0]>[0];
/** Where a query can run: the pool or an open transaction. */
export type Executor = Database | Transaction;

/** Options of {@link openDatabase}. */
export interface OpenDatabaseOptions {
  /** Pool size (default {@link DEFAULT_POOL_SIZE}). */
  readonly max?: number;
  /** Shown in `pg_stat_activity.application_name`. */
  readonly applicationName?: string;
  /** How long one connection attempt may take (default {@link DEFAULT_CONNECT_TIMEOUT_MS}). */
  readonly connectTimeoutMs?: number;
}

/** Default connections per process: enough for a batch loop and a few request handlers. */
export const DEFAULT_POOL_SIZE = 10;

/**
 * How long a connection attempt may take. The client's default (30 s) equals an API client's
 * whole call deadline: while Postgres is unreachable a request would hang until the caller gives
 * up instead of being answered "unavailable, try again".
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

/**
 * Pause before reconnecting, in seconds, by failed attempts in a row. The client's default grows
 * to 20 s, so after an outage of a few seconds a pool sat out up to 20 s more before trying again
 * (and requests waited for it); capped at 1 s, services are back within a second of Postgres.
 */
function reconnectBackoffSeconds(attempts: number): number {
  return Math.min(1, 0.05 * 2 ** attempts);
}

/** An open pool and its drizzle wrapper. */
export interface DatabaseHandle {
  readonly db: Database;
  /** The underlying `postgres` client, for statements drizzle does not express well. */
  readonly sql: postgres.Sql;
  /** Closes the pool, waiting up to `timeoutMs` for running queries. */
  close(timeoutMs?: number): Promise<void>;
}

/** Opens a pool to `url`. Connections are made lazily, on the first query. */
export function openDatabase(url: string, options: OpenDatabaseOptions = {}): DatabaseHandle {
  const sql = postgres(url, {
    max: options.max ?? DEFAULT_POOL_SIZE,
    connect_timeout: (options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) / 1_000,
    backoff: reconnectBackoffSeconds,
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'sluice' },
  });
  const db = drizzle(preparingClient(sql), { schema });
  return {
    db,
    sql,
    close: (timeoutMs = 5_000) => sql.end({ timeout: timeoutMs / 1_000 }),
  };
}

/**
 * The client as drizzle sees it, with every statement prepared: named and kept per connection, so
 * Postgres parses and plans each distinct statement once per connection instead of on every call.
 *
 * Why: drizzle runs every query through `unsafe(text, params, { prepare: false })`, so each one
 * went to Postgres as an unnamed statement, parsed and planned anew — for the admission claim and
 * the settler's statements (large CTEs) planning cost more than running them, and Postgres spent
 * about 10 ms of CPU per task (issue 7 profile). postgres.js re-prepares a statement whose cached
 * plan a migration invalidated. Transactions and savepoints hand drizzle a new client each; those
 * prepare too.
 */
function preparingClient(sql: postgres.Sql): postgres.Sql {
  return new Proxy(sql, {
    get(target, property, receiver) {
      if (property === 'unsafe') {
        return (query: string, args?: unknown, options?: postgres.UnsafeQueryOptions) => {
          const [params, given] = Array.isArray(args)
            ? [args as postgres.ParameterOrJSON<never>[], options]
            : [[], args as postgres.UnsafeQueryOptions | undefined];
          // `simple: false`: postgres.js sends a statement without parameters by the simple
          // protocol, which cannot prepare, so it was parsed and planned at every call. drizzle
          // sends one statement at a time, which the extended protocol takes. (postgres.js reads
          // `simple`, but its types do not declare it.)
          const extended: postgres.UnsafeQueryOptions & { readonly simple: boolean } = {
            ...given,
            prepare: true,
            simple: false,
          };
          return target.unsafe(query, params, extended);
        };
      }
      if (property === 'begin' || property === 'savepoint') {
        const original = Reflect.get(target, property, receiver) as (
          ...args: unknown[]
        ) => Promise<unknown>;
        return (...args: unknown[]) => {
          const callback = args.at(-1) as (client: postgres.Sql) => unknown;
          return original.call(target, ...args.slice(0, -1), (client: postgres.Sql) =>
            callback(preparingClient(client)),
          );
        };
      }
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

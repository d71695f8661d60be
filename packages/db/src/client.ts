/**
 * Connections: one `postgres` pool per process, wrapped by drizzle with the Sluice schema.
 */
import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import * as schema from './schema.js';

/** The drizzle database of Sluice. */
export type Database = PostgresJsDatabase<typeof schema>;
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
}

/** Default connections per process: enough for a batch loop and a few request handlers. */
export const DEFAULT_POOL_SIZE = 10;

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
    onnotice: () => {},
    connection: { application_name: options.applicationName ?? 'sluice' },
  });
  const db = drizzle(sql, { schema });
  return {
    db,
    sql,
    close: (timeoutMs = 5_000) => sql.end({ timeout: timeoutMs / 1_000 }),
  };
}

/**
 * A short transaction sent to Postgres in one write: `BEGIN`, its statements and `COMMIT` go out
 * together on a reserved connection, and the client waits for one round trip instead of two (the
 * statements', then the commit's).
 *
 * It holds for a transaction whose statements do not depend on each other's answers in the
 * client: Postgres runs them in order, each in a snapshot of its own as in any read-committed
 * transaction, and when one fails the ones after it fail too and the `COMMIT` becomes a rollback
 * (a transaction in which a statement failed can only roll back). So the transaction committed
 * exactly when every statement succeeded.
 *
 * Why not `db.transaction`: postgres.js sends `COMMIT` when the callback settles, so a callback
 * that waits for its statements pays a round trip for it, and drizzle's statements start a few
 * microtasks after they are called, so one that does not wait could see its `COMMIT` go out first.
 * Here each statement is started (`execute`) in order, and the driver keeps that order.
 */
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type postgres from 'postgres';
import type { Database } from './client.js';

/** A statement's rows, as the driver answers them. */
export type Rows = readonly Record<string, unknown>[];

/** Turns the statements built with drizzle's `sql` into text and parameters for the driver. */
const dialect = new PgDialect();

/**
 * Runs `statements` in one transaction sent in one write, and answers each one's rows or error, in
 * order: all fulfilled means committed, any rejected means rolled back (a statement after a
 * failed one rejects with `25P02`, the transaction being aborted). A transaction that rolled back
 * because a migration made one of its prepared statements stale is sent again.
 *
 * @throws the error of `BEGIN` or `COMMIT` (the connection failed: whether the transaction
 *   committed is then unknown, as with any commit whose answer is lost).
 */
export async function transactionInOneWrite(
  db: Database,
  statements: readonly SQL[],
): Promise<PromiseSettledResult<Rows>[]> {
  const reserved = await db.$client.reserve();
  try {
    return await sendTransaction(reserved, statements);
  } finally {
    reserved.release();
  }
}

/**
 * {@link transactionInOneWrite} on a connection the caller has reserved (see kept-connection.ts),
 * which must not be running anything else.
 */
export async function sendTransaction(
  reserved: postgres.ReservedSql,
  statements: readonly SQL[],
): Promise<PromiseSettledResult<Rows>[]> {
  // Each try that meets a stale statement has the driver prepare that one again at the next.
  for (let tries = 1; ; tries++) {
    const outcomes = await sendOnce(reserved, statements);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (!failed || !isStalePlan(failed.reason) || tries > statements.length) return outcomes;
  }
}

async function sendOnce(
  reserved: postgres.ReservedSql,
  statements: readonly SQL[],
): Promise<PromiseSettledResult<Rows>[]> {
  // `simple: false` as the pool's own statements (client.ts): prepared, also without
  // parameters. (postgres.js reads `simple`; its types do not declare it.)
  const options = { prepare: true, simple: false } as postgres.UnsafeQueryOptions;
  const queries: (Promise<unknown> & { execute(): unknown })[] = [
    reserved`begin`,
    ...statements.map((statement) => {
      const { sql, params } = dialect.sqlToQuery(statement);
      return reserved.unsafe(sql, params as never[], options);
    }),
    reserved`commit`,
  ];
  for (const query of queries) void query.execute();
  const settled = await Promise.allSettled(queries);
  const [began, ...rest] = settled;
  const committed = rest.pop();
  for (const outcome of [began, committed]) {
    if (outcome?.status === 'rejected') throw outcome.reason;
  }
  return rest as PromiseSettledResult<Rows>[]; // the driver answers rows
}

/**
 * Whether a statement failed because its prepared form went stale: a migration changed what a
 * `select *` or `returning *` answers ("cached plan must not change result type"), or the prepared
 * statement is gone. Its transaction rolled back, having written nothing, and the driver prepares
 * the statement again for its next use (outside a transaction it runs it again itself; inside one
 * it cannot: patches/postgres@3.4.9.patch).
 */
function isStalePlan(error: unknown): boolean {
  const routine = (error as { routine?: unknown } | null)?.routine;
  return routine === 'RevalidateCachedQuery' || routine === 'FetchPreparedStatement';
}

/** The rows of a statement of a one-write transaction, or its error thrown. */
export function rowsOf(outcome: PromiseSettledResult<Rows> | undefined): Rows {
  if (outcome === undefined) throw new Error('a statement of the transaction was not answered');
  if (outcome.status === 'rejected') throw outcome.reason;
  return outcome.value;
}

/**
 * A pool connection kept reserved by one loop that runs one short transaction at a time, sent in
 * one write (one-write.ts). The dispatcher's claim is such a transaction, on the path of every
 * step from its create to its start.
 *
 * Why kept rather than reserved per transaction: the pool's `reserve()` waits for a connection
 * with nothing in flight, and a busy service's pool rarely has one — its other statements are
 * pipelined on whichever connection is least busy. Reserving per claim made the claim itself
 * faster on an idle system but wait for a connection under load (issue 7, lever 7). A kept
 * connection is idle whenever its loop starts a transaction.
 *
 * When the connection fails (`BEGIN` or `COMMIT` fails: Postgres restarted, the socket reset), it
 * is handed back and the next transaction reserves another; the driver fails the statements of a
 * reservation whose connection closed (patches/postgres@3.4.9.patch), so none reaches a
 * connection the pool gave to someone else.
 */
import type { SQL } from 'drizzle-orm';
import type postgres from 'postgres';
import type { Database } from './client.js';
import { sendTransaction, type Rows } from './one-write.js';

/** A connection of `db`'s pool, reserved on first use and kept until {@link close}. */
export class KeptConnection {
  #reserving: Promise<postgres.ReservedSql> | undefined;
  #closed = false;

  constructor(private readonly db: Database) {}

  /**
   * Runs `statements` as one transaction in one write on the kept connection (see
   * `transactionInOneWrite` for what is answered). One transaction at a time.
   *
   * @throws the error of reserving a connection, of `BEGIN` or of `COMMIT`.
   */
  async transaction(statements: readonly SQL[]): Promise<PromiseSettledResult<Rows>[]> {
    if (this.#closed) throw new Error('the kept connection was closed');
    const reserving = (this.#reserving ??= this.db.$client.reserve());
    let reserved: postgres.ReservedSql;
    try {
      reserved = await reserving;
    } catch (error) {
      this.#reserving = undefined;
      throw error;
    }
    try {
      return await sendTransaction(reserved, statements);
    } catch (error) {
      this.#reserving = undefined;
      reserved.release();
      throw error;
    }
  }

  /**
   * Hands the connection back to the pool; later transactions are refused. Call it before the pool
   * ends: the pool waits for a reserved connection to be released.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const reserving = this.#reserving;
    this.#reserving = undefined;
    const reserved = await reserving?.catch(() => undefined);
    reserved?.release();
  }
}

/**
 * The plan Postgres chose for a statement, with what it cost: for benchmarks and diagnosis.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Database } from '../client.js';

/** Thrown to roll the explained statement's effects back. */
class RollBack extends Error {
  constructor(readonly lines: string[]) {
    super('explained statement rolled back');
  }
}

/**
 * `EXPLAIN (ANALYZE, BUFFERS)` of `statement`, one string per plan line. ANALYZE runs the statement,
 * so it runs in a transaction that is rolled back: a write it explains changes nothing.
 */
export async function explainAnalyze(db: Database, statement: SQL): Promise<string[]> {
  try {
    await db.transaction(async (tx) => {
      const rows = await tx.execute<{ 'QUERY PLAN': string }>(
        sql`explain (analyze, buffers) ${statement}`,
      );
      throw new RollBack(rows.map((row) => row['QUERY PLAN']));
    });
  } catch (error) {
    if (error instanceof RollBack) return error.lines;
    throw error;
  }
  throw new Error('the explained statement was not rolled back');
}

/**
 * The leader epoch of a role, kept in Postgres (`leader_epochs`): a number that grows with every new
 * leadership tenure and survives the loss of JetStream's store, unlike the lease's KV revision.
 */
import type { DatabaseHandle } from '@sluice/db';

/** The `leader_epochs` role of the governor. */
export const GOVERNOR_ROLE = 'governor';

/**
 * Starts a new tenure of `role` for `holder`: increments the role's epoch (the first tenure gets 1)
 * and returns it. One statement, so two racing leaders always get distinct epochs, and the later
 * one the greater.
 *
 * @param sql the raw client of the pool (`openDatabase(url).sql`)
 * @throws the driver's error when Postgres cannot be reached.
 */
export async function advanceLeaderEpoch(
  sql: DatabaseHandle['sql'],
  role: string,
  holder: string,
): Promise<number> {
  // Raw SQL because `epoch = epoch + 1` needs drizzle's `sql` template, and drizzle-orm is
  // @sluice/db's dependency, not the governor's.
  const rows = await sql<{ epoch: string }[]>`
    INSERT INTO leader_epochs (role, epoch, holder, updated_at)
    VALUES (${role}, 1, ${holder}, now())
    ON CONFLICT (role) DO UPDATE
      SET epoch = leader_epochs.epoch + 1, holder = EXCLUDED.holder, updated_at = now()
    RETURNING epoch::text AS epoch`;
  const epoch = Number(rows[0]?.epoch);
  if (!Number.isSafeInteger(epoch) || epoch < 1) {
    throw new Error(`leader_epochs returned an unusable epoch for role ${role}`);
  }
  return epoch;
}

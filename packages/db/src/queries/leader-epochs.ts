/**
 * Leader epochs (`leader_epochs`): a number per role that grows with every new leadership tenure
 * and survives the loss of JetStream's store, unlike a lease's KV revision. Writers pass it along
 * as a fencing token, so a deposed leader's late writes can be recognised and refused.
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { leaderEpochs } from '../schema.js';

/**
 * Starts a new tenure of `role` for `holder`: increments the role's epoch (the first tenure gets 1)
 * and returns it. One statement, so two racing leaders always get distinct epochs, and the later
 * one the greater.
 */
export async function advanceLeaderEpoch(
  executor: Executor,
  role: string,
  holder: string,
): Promise<number> {
  const rows = await executor
    .insert(leaderEpochs)
    .values({ role, epoch: 1, holder })
    .onConflictDoUpdate({
      target: leaderEpochs.role,
      set: { epoch: sql`${leaderEpochs.epoch} + 1`, holder, updatedAt: sql`now()` },
    })
    .returning({ epoch: leaderEpochs.epoch });
  const epoch = rows[0]?.epoch;
  if (epoch === undefined || !Number.isSafeInteger(epoch) || epoch < 1) {
    throw new Error(`leader_epochs returned an unusable epoch for role ${role}`);
  }
  return epoch;
}

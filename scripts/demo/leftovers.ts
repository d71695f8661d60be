/**
 * Cancelling what a demo cut short leaves unfinished (Ctrl-C, the deadline, a service that died),
 * so that no queued work of it waits in the shared database for the next `npm start` — work whose
 * fake LLM and web site are gone. Done in Postgres once the demo's services have stopped: under
 * Ctrl-C they receive the signal too and may be gone before the gateway could be asked. The cancel
 * goes through the transition function the gateway uses, so every history stays a path in the
 * state machine.
 */
import { applyTransition, cancelWaitingSteps, type DatabaseHandle } from '@sluice/db';

/** What {@link cancelUnfinished} did. */
export interface CancelledLeftovers {
  /** Tasks now cancelled. */
  readonly cancelled: number;
  /** Running tasks now marked cancel-requested: the next stack settles them as cancelled. */
  readonly requested: number;
}

/** Cancels every task of `tenantId` that has not reached a final state. */
export async function cancelUnfinished(
  database: DatabaseHandle,
  tenantId: string,
  reason: string,
): Promise<CancelledLeftovers> {
  const rows = await database.sql<{ id: string }[]>`
    select id from tasks
    where tenant_id = ${tenantId} and status not in ('succeeded', 'failed_terminal', 'cancelled')`;
  let cancelled = 0;
  let requested = 0;
  for (const { id } of rows) {
    await database.db.transaction(async (tx) => {
      const result = await applyTransition(tx, {
        taskId: id,
        tenantId,
        event: { type: 'cancel' },
        data: { reason },
      });
      if (!result.ok) return;
      if (result.to.status === 'cancelled') {
        await cancelWaitingSteps(tx, id);
        cancelled++;
      } else if (result.to.cancelRequested) requested++;
    });
  }
  return { cancelled, requested };
}

/**
 * Publishes the P0 steps a create claimed in its own transaction (`claimUrgentSteps`), as the
 * scheduler's dispatcher publishes its claims: each to its resource's subject, in a `send` span of
 * the task's trace; the stream sequences recorded for the reconciler; a step whose publication
 * failed put back into the ready queue, with a wake-up of the scheduler's admission so it is
 * dispatched from there.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { publishClaimedSteps, wakeDispatcherForEach, type BusCatalog } from '@sluice/bus';
import { recordPublishSeqs, releaseClaims, type ClaimedStep, type Database } from '@sluice/db';
import type { Logger, Metrics, Tracer } from '@sluice/telemetry';

export interface UrgentDispatchDeps {
  readonly db: Database;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  readonly tracer: Tracer;
  readonly log: Logger;
  readonly metrics: Metrics;
}

/** Publishes `claimed` (dispatched and committed); never throws for a failed publication. */
export async function dispatchUrgentSteps(
  deps: UrgentDispatchDeps,
  claimed: readonly ClaimedStep[],
): Promise<void> {
  if (claimed.length === 0) return;
  const { published, failed } = await publishClaimedSteps(deps, claimed);
  await recordPublishSeqs(deps.db, published);
  if (failed.length === 0) return;
  await releaseClaims(deps.db, failed);
  wakeDispatcherForEach(deps.nc, deps.catalog, 'urgent.released', failed);
}

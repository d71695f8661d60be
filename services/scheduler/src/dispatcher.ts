/**
 * Admission and dispatch: claims ready steps from Postgres (within the resource and tenant limits,
 * most urgent first with aging, fair between tenants; see `claimReadySteps`) and publishes each to
 * its resource's subject on JetStream, recording the stream sequence (see publication-recorder.ts). A
 * step whose publication fails goes back to the ready queue.
 *
 * The claim commits before the publish. If the scheduler dies in between, the step stays
 * `dispatched` with no message; the reconciler (recovery issue) re-dispatches such steps.
 *
 * Each publication is a messaging `send` span in the task's trace (see `publishClaimedSteps`, which
 * the gateway also uses for the P0 steps a create claims itself).
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { publishClaimedSteps, type BusCatalog } from '@sluice/bus';
import {
  claimAdmission,
  claimAdmissionOn,
  DEFAULT_ADMISSION,
  recordPublishSeqs,
  releaseClaims,
  withDatabaseSpan,
  type AdmissionSettings,
  type Database,
  type KeptConnection,
} from '@sluice/db';
import { tracerFor, type Logger, type Metrics } from '@sluice/telemetry';
import type { AdmissionPassOutcome } from './freed-slots.js';
import type { PublicationSink } from './publication-recorder.js';
import { SCHEDULER_TRACER } from './task-trace.js';

/** How many steps a claim took (on its database span). */
export const ATTR_CLAIMED = 'sluice.claimed';
/** `db.query.summary` of the claim: lock the ready resources, then claim their steps. */
const CLAIM_SUMMARY = 'SELECT task_steps UPDATE task_steps';

/** What the dispatcher needs. */
export interface DispatcherDeps {
  readonly db: Database;
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly batchSize: number;
  /**
   * Limits and aging of admission ({@link DEFAULT_ADMISSION} when left out), or a function giving
   * the settings of each claim (the governor's decision changes them).
   */
  readonly admission?: AdmissionSettings | (() => AdmissionSettings);
  /**
   * A connection kept for the claims (the scheduler's dispatch loop runs one pass at a time): each
   * claim is then one round trip, its `COMMIT` sent with it. Left out, a claim is a transaction of
   * the pool's.
   */
  readonly claimConnection?: KeptConnection;
  /**
   * Takes the stream sequences of the pass's publications (the scheduler's `PublicationRecorder`
   * writes them a little later, many passes together); left out, they are written before the pass
   * ends.
   */
  readonly publications?: PublicationSink;
  /** Sees each failed publication (a missing stream must be recreated before any can succeed). */
  readonly onPublishFailed?: (error: unknown) => void;
}

/**
 * What one pass did and saw: `more` when its batch was full (more may be ready); the resources its
 * claim found full (see `FullResources`) and whether due ready steps stayed behind (see
 * `FreedSlots`; a step whose publication failed is behind too); whether it admitted P0 work.
 */
export interface DispatchPass extends AdmissionPassOutcome {
  readonly more: boolean;
  /** Steps it claimed. */
  readonly claimed: number;
  /** The resources of the P0 steps it admitted (whose wait the urgent-wait guard then watches). */
  readonly urgentResources: readonly string[];
}

/** Claims and publishes one batch. */
export async function dispatchBatch(deps: DispatcherDeps): Promise<DispatchPass> {
  const admission =
    typeof deps.admission === 'function' ? deps.admission() : (deps.admission ?? DEFAULT_ADMISSION);
  // One span for the claim, in a trace of its own: it serves many tasks, none of whose traces it
  // belongs to. A poll that claimed nothing leaves no span.
  const {
    steps: claimed,
    full,
    leftBehind,
  } = await withDatabaseSpan(
    deps.db,
    {
      summary: CLAIM_SUMMARY,
      recordIf: ({ steps }) => steps.length > 0,
      resultAttributes: ({ steps }) => ({ [ATTR_CLAIMED]: steps.length }),
    },
    () =>
      deps.claimConnection
        ? claimAdmissionOn(deps.claimConnection, deps.batchSize, admission)
        : deps.db.transaction((tx) => claimAdmission(tx, deps.batchSize, admission)),
  );
  if (claimed.length === 0)
    return { more: false, claimed: 0, full, leftBehind, urgentResources: [] };
  const { published, failed } = await publishClaimedSteps(
    { ...deps, tracer: tracerFor(SCHEDULER_TRACER) },
    claimed,
  );
  if (deps.publications) await deps.publications.record(published);
  else await recordPublishSeqs(deps.db, published);
  await releaseClaims(deps.db, failed);
  deps.log.debug({ dispatched: published.length, failed: failed.length }, 'dispatched a batch');
  return {
    more: claimed.length === deps.batchSize && failed.length === 0,
    claimed: claimed.length,
    full,
    leftBehind: leftBehind || failed.length > 0,
    urgentResources: [
      ...new Set(claimed.filter((step) => step.priority === 0).map((step) => step.resource)),
    ],
  };
}

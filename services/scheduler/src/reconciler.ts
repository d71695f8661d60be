/**
 * The reconciler: finds steps Postgres says are in flight that show no sign of it, and dispatches
 * them again. Postgres is the source of truth; JetStream may lose a message (a purge, a lost store,
 * a host crash before its fsync), and the scheduler may die between claiming a step and publishing
 * it. One replica runs it at a time (the `reconciler` lease).
 *
 * A step is lost when it was claimed and never published (no publish sequence after a grace period),
 * or when it is dispatched or running with no heartbeat past the stale threshold and the message of
 * its current dispatch is no longer in the steps stream. A message still there is left to
 * JetStream, which redelivers it (or dead-letters it after `max_deliver`). A lost step goes back to
 * the ready queue and gets a new dispatch number when claimed; one dispatched too often already is
 * poison work: it is failed through the same outcome path executors use and, in the same
 * transaction, recorded as a dead letter (reason `max_deliveries`: Sluice's own delivery cap, as
 * JetStream's `max_deliver` is the broker's), so the task fails with reason `dead_letter`.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import { dispatchMsgId, readStreamMessage, type BusCatalog } from '@sluice/bus';
import type { SerializedStepError } from '@sluice/core';
import {
  failLostStep,
  findStaleSteps,
  findStep,
  insertDeadLetter,
  requeueLostStep,
  type Database,
  type StaleStep,
} from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';

/** The header JetStream deduplicates publications by (set from the publish's `msgID`). */
const MSG_ID_HEADER = 'Nats-Msg-Id';

/** What the reconciler needs, and its thresholds. */
export interface ReconcilerDeps {
  readonly db: Database;
  readonly jsm: JetStreamManager;
  readonly catalog: BusCatalog;
  readonly log: Logger;
  /** Counts the dead letters of steps failed at the dispatch cap, when given. */
  readonly metrics?: Metrics;
  /** Candidates examined per batch. */
  readonly batchSize: number;
  /** A claim with no recorded publication older than this was never published. */
  readonly graceMs: number;
  /** No heartbeat (or, never started, no dispatch) for this long: no sign of life. */
  readonly staleMs: number;
  /** A lost step dispatched this many times already is failed instead of dispatched again. */
  readonly maxDispatches: number;
  /** Lost steps went back to the ready queue (wake the dispatcher). */
  readonly onStepsReady?: () => void;
  /** Failed outcomes were recorded (wake the outcome applier). */
  readonly onOutcomesRecorded?: () => void;
}

/** What one batch did. */
export interface ReconcileResult {
  /** Steps put back into the ready queue. */
  readonly requeued: number;
  /** Steps failed because their dispatches reached the cap. */
  readonly failed: number;
  /** Candidates whose message is still in the stream (left to JetStream). */
  readonly inStream: number;
  /** Whether the scan has more candidates right away (the page was full). */
  readonly more: boolean;
}

/** A reconciler keeping its scan position between batches. */
export interface Reconciler {
  /** Examines the next page of candidates and acts on the lost ones. */
  reconcileBatch(): Promise<ReconcileResult>;
}

/**
 * Creates a reconciler. It scans candidates in id order page by page and wraps around at the end,
 * so a long backlog of steps whose messages are still waiting in the stream cannot hide a lost step
 * behind it.
 */
export function createReconciler(deps: ReconcilerDeps): Reconciler {
  let afterId = 0;
  return {
    async reconcileBatch() {
      const candidates = await findStaleSteps(deps.db, {
        graceMs: deps.graceMs,
        staleMs: deps.staleMs,
        afterId,
        limit: deps.batchSize,
      });
      const more = candidates.length === deps.batchSize;
      afterId = more ? (candidates.at(-1)?.id ?? 0) : 0;
      const inStream = await Promise.all(candidates.map((step) => messageInStream(deps, step)));
      let requeued = 0;
      let failed = 0;
      for (const [index, step] of candidates.entries()) {
        if (inStream[index]) continue;
        if (step.dispatch >= deps.maxDispatches) {
          const letterId = await failAtCap(deps, step);
          if (letterId !== undefined) {
            failed += 1;
            deps.metrics?.deadLetterCount.inc({ reason: 'max_deliveries' });
            deps.log.warn(
              {
                task_id: step.taskId,
                step_seq: step.seq,
                dispatches: step.dispatch,
                dead_letter_id: letterId,
              },
              'lost step reached its dispatch cap; failing it with a dead letter',
            );
          }
        } else if (await deps.db.transaction((tx) => requeueLostStep(tx, step))) {
          requeued += 1;
          deps.log.info(
            { task_id: step.taskId, step_seq: step.seq, dispatch: step.dispatch, kind: step.kind },
            'lost step goes back to the ready queue',
          );
        }
      }
      if (requeued > 0) deps.onStepsReady?.();
      if (failed > 0) deps.onOutcomesRecorded?.();
      const kept = inStream.filter(Boolean).length;
      return { requeued, failed, inStream: kept, more };
    },
  };
}

/**
 * Whether the message of the step's current dispatch is still in the steps stream. The message at
 * the recorded sequence must carry this dispatch's id: after the stream was recreated (a lost
 * store), the same sequence may hold another step's message. A step never published has none.
 */
async function messageInStream(deps: ReconcilerDeps, step: StaleStep): Promise<boolean> {
  if (step.kind === 'unpublished' || step.publishSeq === null) return false;
  const message = await readStreamMessage(deps.jsm, deps.catalog.streams.steps, step.publishSeq);
  if (message === null) return false;
  return message.header.get(MSG_ID_HEADER) === dispatchMsgId(step.taskId, step.seq, step.dispatch);
}

/**
 * Fails a step at its dispatch cap and writes its dead letter in one transaction (never one without
 * the other); the letter's id, or `undefined` when the step changed since it was seen.
 */
async function failAtCap(deps: ReconcilerDeps, step: StaleStep): Promise<string | undefined> {
  const error = capError(step.dispatch);
  return deps.db.transaction(async (tx) => {
    if (!(await failLostStep(tx, step, error))) return undefined;
    const row = await findStep(tx, step.taskId, step.seq);
    if (!row) throw new Error(`step ${step.seq} of task ${step.taskId} vanished`);
    return insertDeadLetter(tx, {
      taskId: step.taskId,
      tenantId: row.tenantId,
      step: row.name,
      stepSeq: step.seq,
      reason: 'max_deliveries',
      error,
      attempts: step.dispatch,
    });
  });
}

/** The failure recorded for a step lost again and again. */
function capError(dispatches: number): SerializedStepError {
  return {
    errorClass: 'unknown',
    message: `dispatched ${dispatches} times without an outcome`,
    retryable: false,
  };
}

/**
 * The advisory worker: turns JetStream's dead-letter advisories about step messages into rows of
 * `dead_letters`. One replica runs it at a time (the `dead_letters` lease).
 *
 * On nats-server 2.9 a step message that exhausted `max_deliver` stays in the work-queue stream
 * (NATS-NOTES §4): the worker fetches it by the advisory's stream sequence, and — when it is still
 * the current dispatch of a step in flight — records the dead letter and a non-retryable failure of
 * the step in one transaction, then deletes the message and acknowledges the advisory. The failure
 * goes through the outcome path executors use, so the scheduler fails the task; being
 * non-retryable, it writes no second letter (the applier writes one only for exhausted attempts).
 *
 * A terminated message is already gone on 2.9 (`term()` deletes it) and Sluice's executor
 * terminates only messages it cannot decode, which name no step: those advisories are logged and
 * acknowledged. Every step is idempotent: a redelivered advisory finds the step failed already (or
 * the message gone) and records nothing.
 */
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import {
  decodeMessageOf,
  decodeStepAdvisory,
  fetchEach,
  readStreamMessage,
  type BusCatalog,
  type StepAdvisory,
  type StepDispatch,
} from '@sluice/bus';
import type { SerializedStepError } from '@sluice/core';
import { failLostStep, findStep, insertDeadLetter, type Database } from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import type { BatchReport } from './batch-loop.js';

/** What the worker needs. */
export interface AdvisoryWorkerDeps {
  readonly db: Database;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly catalog: BusCatalog;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Advisories fetched per batch. */
  readonly batchSize: number;
  /** How long one fetch waits for advisories (keeps a stopping loop prompt). */
  readonly fetchExpiresMs?: number;
  /** Failed outcomes were recorded (wake the outcome applier). */
  readonly onOutcomesRecorded?: () => void;
}

/** What handling one advisory did. */
export type AdvisoryHandling =
  /** A dead letter was written and the step failed; the message was deleted. */
  | 'dead_lettered'
  /** The message belonged to no step in flight under its dispatch (stale); it was deleted. */
  | 'stale'
  /** The message was no longer in the stream (terminated, or handled before). */
  | 'gone'
  /** The advisory names no message of the steps stream, or one that cannot be decoded. */
  | 'ignored';

/** Default wait of one fetch: short, so the loop notices a stop (or a lost lease) soon. */
export const DEFAULT_ADVISORY_FETCH_EXPIRES_MS = 1_000;

/** Pause before an advisory that failed to be handled (Postgres or NATS trouble) comes back. */
const RETRY_DELAY_MS = 1_000;

/**
 * Fetches one batch of advisories from the dead-letter consumer and handles each; says how many it
 * fetched, whether the batch was full (more may be waiting) and, when it fetched none, that the
 * loop is idle (dead letters are not urgent: a quiet system asks less often). An advisory that
 * fails to be handled is negatively acknowledged with a delay, so it comes back; one that cannot
 * be decoded is dropped.
 */
export async function handleAdvisoryBatch(deps: AdvisoryWorkerDeps): Promise<BatchReport> {
  const consumer = await deps.js.consumers.get(
    deps.catalog.streams.advisories,
    deps.catalog.consumers.deadLetters,
  );
  let failed = 0;
  const count = await fetchEach(
    consumer,
    {
      maxMessages: deps.batchSize,
      expiresMs: deps.fetchExpiresMs ?? DEFAULT_ADVISORY_FETCH_EXPIRES_MS,
    },
    async (message) => {
      if ((await handleAdvisoryMessage(deps, message)) === 'dead_lettered') failed += 1;
    },
  );
  if (failed > 0) deps.onOutcomesRecorded?.();
  return { more: count === deps.batchSize, handled: count, idle: count === 0 };
}

/** Handles one delivered advisory and settles it (ack, or nak to try again later). */
async function handleAdvisoryMessage(
  deps: AdvisoryWorkerDeps,
  message: JsMsg,
): Promise<AdvisoryHandling | undefined> {
  let advisory: StepAdvisory;
  try {
    advisory = decodeStepAdvisory(message.subject, message.data);
  } catch (error) {
    // Redelivering the same bytes cannot fix them.
    deps.log.warn({ err: error, subject: message.subject }, 'malformed advisory dropped');
    message.ack();
    return 'ignored';
  }
  try {
    const handled = await handleStepAdvisory(deps, advisory);
    message.ack();
    return handled;
  } catch (error) {
    deps.log.warn(
      { err: error, stream_seq: advisory.stream_seq, kind: advisory.kind },
      'advisory not handled; it comes back',
    );
    message.nak(RETRY_DELAY_MS);
    return undefined;
  }
}

/**
 * Acts on one advisory (without acknowledging it). Safe to repeat: the dead letter is written only
 * while the step is still in flight under the message's dispatch number, and that same
 * transaction fails the step.
 */
export async function handleStepAdvisory(
  deps: Pick<AdvisoryWorkerDeps, 'db' | 'jsm' | 'catalog' | 'log' | 'metrics'>,
  advisory: StepAdvisory,
): Promise<AdvisoryHandling> {
  const steps = deps.catalog.streams.steps;
  const context = {
    kind: advisory.kind,
    stream_seq: advisory.stream_seq,
    consumer: advisory.consumer,
    deliveries: advisory.deliveries,
  };
  if (advisory.stream !== steps) {
    deps.log.warn({ ...context, stream: advisory.stream }, 'advisory of another stream ignored');
    return 'ignored';
  }
  if (advisory.kind === 'terminated') {
    // Gone already (2.9 deletes on term); the executor terminates only undecodable messages and
    // logged each one, so there is no step to name here.
    deps.log.info(context, 'terminated step message (the executor logged it)');
    return 'gone';
  }
  const stored = await readStreamMessage(deps.jsm, steps, advisory.stream_seq);
  if (stored === null) return 'gone';
  let dispatch: StepDispatch;
  try {
    dispatch = decodeMessageOf('step.dispatch', stored.subject, stored.data);
  } catch (error) {
    deps.log.warn({ ...context, err: error }, 'undecodable step message deleted');
    await deleteStepMessage(deps, advisory.stream_seq);
    return 'ignored';
  }
  const letterId = await deps.db.transaction(async (tx) => {
    const step = await findStep(tx, dispatch.task_id, dispatch.step_seq);
    const status = step?.status;
    if (!step || !isInFlight(status)) return undefined;
    if (step.dispatchCount !== dispatch.dispatch) return undefined;
    const error = maxDeliveriesError(advisory);
    const seen = {
      id: step.id,
      taskId: step.taskId,
      seq: step.seq,
      status,
      dispatch: step.dispatchCount,
    };
    // Conditional on the state just read (and the task still active): of two workers racing on a
    // redelivered advisory, only one fails the step, and only that one writes the letter.
    if (!(await failLostStep(tx, seen, error))) return undefined;
    return insertDeadLetter(tx, {
      taskId: step.taskId,
      tenantId: dispatch.tenant_id,
      step: step.name,
      stepSeq: step.seq,
      reason: 'max_deliveries',
      error,
      attempts: advisory.deliveries,
      streamSeq: advisory.stream_seq,
    });
  });
  await deleteStepMessage(deps, advisory.stream_seq);
  const fields = { ...context, task_id: dispatch.task_id, step_seq: dispatch.step_seq };
  if (letterId === undefined) {
    deps.log.info(
      { ...fields, dispatch: dispatch.dispatch },
      'stale max-delivered message deleted',
    );
    return 'stale';
  }
  deps.metrics.deadLetterCount.inc({ reason: 'max_deliveries' });
  deps.log.warn({ ...fields, dead_letter_id: letterId }, 'step message max-delivered: dead letter');
  return 'dead_lettered';
}

/** Whether a step status means "in flight" (its message may still be delivered). */
function isInFlight(status: string | undefined): status is 'dispatched' | 'running' {
  return status === 'dispatched' || status === 'running';
}

/** Deletes a step message; one already gone (a repeated advisory) is fine. */
async function deleteStepMessage(
  deps: Pick<AdvisoryWorkerDeps, 'jsm' | 'catalog'>,
  seq: number,
): Promise<void> {
  const steps = deps.catalog.streams.steps;
  try {
    await deps.jsm.streams.deleteMessage(steps, seq, false);
  } catch (error) {
    if ((await readStreamMessage(deps.jsm, steps, seq)) !== null) throw error;
  }
}

/** The failure recorded for a step whose message JetStream gave up on. */
function maxDeliveriesError(advisory: StepAdvisory): SerializedStepError {
  return {
    errorClass: 'unknown',
    message:
      `step message delivered ${advisory.deliveries} times without an outcome ` +
      `(JetStream max deliveries, stream sequence ${advisory.stream_seq}); its executor may crash on it`,
    retryable: false,
  };
}

/**
 * Admission and dispatch: claims ready steps from Postgres (within the resource and tenant limits,
 * most urgent first with aging, fair between tenants; see `claimReadySteps`) and publishes each to
 * its resource's subject on JetStream, recording the stream sequence (see publication-recorder.ts). A
 * step whose publication fails goes back to the ready queue.
 *
 * The claim commits before the publish. If the scheduler dies in between, the step stays
 * `dispatched` with no message; the reconciler (recovery issue) re-dispatches such steps.
 *
 * Each publication is a messaging `send` span (kind PRODUCER) in the task's trace, a child of the
 * traceparent stored on the task; its context is what the message's headers carry, so the
 * executor's work on the step continues from the dispatch that delivered it.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import {
  dispatchMsgId,
  encodeMessage,
  injectTraceContext,
  publishDurable,
  type BusCatalog,
} from '@sluice/bus';
import { priorityLabel } from '@sluice/core';
import {
  claimAdmission,
  DEFAULT_ADMISSION,
  recordPublishSeqs,
  releaseClaims,
  withDatabaseSpan,
  type AdmissionSettings,
  type ClaimedStep,
  type Database,
} from '@sluice/db';
import {
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
  ATTR_PRIORITY,
  ATTR_RESOURCE,
  ATTR_STEP,
  ATTR_TASK_ID,
  ATTR_TENANT,
  SpanKind,
  tracerFor,
  withContinuedSpan,
  type Logger,
  type Metrics,
} from '@sluice/telemetry';
import type { AdmissionPassOutcome } from './freed-slots.js';
import type { PublicationSink, PublishedDispatch } from './publication-recorder.js';
import { SCHEDULER_TRACER } from './task-trace.js';

/** The dispatch number of a publication (1 for the first; more after the reconciler's). */
export const ATTR_DISPATCH = 'sluice.step.dispatch';
/** The JetStream sequence the publication was stored at. */
export const ATTR_STREAM_SEQUENCE = 'sluice.jetstream.sequence';

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
    () => deps.db.transaction((tx) => claimAdmission(tx, deps.batchSize, admission)),
  );
  if (claimed.length === 0) return { more: false, full, leftBehind, urgentResources: [] };
  const results = await Promise.allSettled(claimed.map((step) => publish(deps, step)));
  const published: PublishedDispatch[] = [];
  const failed: Array<{ stepId: number; dispatch: number }> = [];
  results.forEach((result, index) => {
    const step = claimed[index] as ClaimedStep;
    if (result.status === 'fulfilled') {
      published.push({ stepId: step.id, dispatch: step.dispatch, publishSeq: result.value });
      deps.metrics.stepsDispatched.inc({
        resource: step.resource,
        priority: priorityLabel(step.priority),
      });
    } else {
      failed.push({ stepId: step.id, dispatch: step.dispatch });
      deps.onPublishFailed?.(result.reason);
      deps.log.warn(
        { err: result.reason, task_id: step.taskId, step_seq: step.seq },
        'dispatch failed; the step goes back to the ready queue',
      );
    }
  });
  if (deps.publications) await deps.publications.record(published);
  else await recordPublishSeqs(deps.db, published);
  await releaseClaims(deps.db, failed);
  deps.log.debug({ dispatched: published.length, failed: failed.length }, 'dispatched a batch');
  return {
    more: claimed.length === deps.batchSize && failed.length === 0,
    full,
    leftBehind: leftBehind || failed.length > 0,
    urgentResources: [
      ...new Set(claimed.filter((step) => step.priority === 0).map((step) => step.resource)),
    ],
  };
}

/**
 * Publishes one claimed step in its `send <subject>` span; the span's context goes into the
 * message headers (W3C `traceparent`).
 */
async function publish(deps: DispatcherDeps, step: ClaimedStep): Promise<number> {
  const subject = deps.catalog.subjects.step(step.resource, step.priority);
  const msgID = dispatchMsgId(step.taskId, step.seq, step.dispatch);
  const attributes = {
    [ATTR_MESSAGING_SYSTEM]: 'nats',
    [ATTR_MESSAGING_DESTINATION_NAME]: subject,
    [ATTR_MESSAGING_OPERATION_TYPE]: 'send',
    [ATTR_MESSAGING_OPERATION_NAME]: 'publish',
    [ATTR_MESSAGING_MESSAGE_ID]: msgID,
    [ATTR_TASK_ID]: step.taskId,
    [ATTR_TENANT]: step.tenantId,
    [ATTR_STEP]: step.name,
    [ATTR_RESOURCE]: step.resource,
    [ATTR_PRIORITY]: priorityLabel(step.priority),
    [ATTR_DISPATCH]: step.dispatch,
  };
  return withContinuedSpan(
    tracerFor(SCHEDULER_TRACER),
    step.traceParent,
    `send ${subject}`,
    { attributes, kind: SpanKind.PRODUCER },
    async (span) => {
      // The active context is the send span's: the consumer's work becomes its child.
      const ack = await publishDurable(
        deps.js,
        subject,
        encodeMessage({
          type: 'step.dispatch',
          task_id: step.taskId,
          step_seq: step.seq,
          dispatch: step.dispatch,
          tenant_id: step.tenantId,
          priority: step.priority,
          resource: step.resource,
        }),
        { msgID, headers: injectTraceContext(headers()) },
      );
      span.setAttribute(ATTR_STREAM_SEQUENCE, ack.seq);
      return ack.seq;
    },
  );
}

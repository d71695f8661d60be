/**
 * Admission and dispatch: claims ready steps from Postgres (within the resource and tenant limits,
 * most urgent first with aging, fair between tenants; see `claimReadySteps`) and publishes each to
 * its resource's subject on JetStream, recording the stream sequence. A step whose publication fails
 * goes back to the ready queue.
 *
 * The claim commits before the publish. If the scheduler dies in between, the step stays
 * `dispatched` with no message; the reconciler (recovery issue) re-dispatches such steps.
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
  claimReadySteps,
  DEFAULT_ADMISSION,
  recordPublishSeqs,
  releaseClaims,
  type AdmissionSettings,
  type ClaimedStep,
  type Database,
} from '@sluice/db';
import { contextFromTraceparent, type Logger, type Metrics } from '@sluice/telemetry';

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
  /** Sees every batch claimed (the governor's throttles are charged with it). */
  readonly onClaimed?: (steps: readonly ClaimedStep[]) => void;
  /** Sees each failed publication (a missing stream must be recreated before any can succeed). */
  readonly onPublishFailed?: (error: unknown) => void;
}

/** Claims and publishes one batch; returns true when the batch was full (more may be ready). */
export async function dispatchBatch(deps: DispatcherDeps): Promise<boolean> {
  const admission =
    typeof deps.admission === 'function' ? deps.admission() : (deps.admission ?? DEFAULT_ADMISSION);
  const claimed = await deps.db.transaction((tx) => claimReadySteps(tx, deps.batchSize, admission));
  if (claimed.length === 0) return false;
  deps.onClaimed?.(claimed);
  const results = await Promise.allSettled(claimed.map((step) => publish(deps, step)));
  const published: Array<{ stepId: number; dispatch: number; publishSeq: number }> = [];
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
  await recordPublishSeqs(deps.db, published);
  await releaseClaims(deps.db, failed);
  deps.log.debug({ dispatched: published.length, failed: failed.length }, 'dispatched a batch');
  return claimed.length === deps.batchSize && failed.length === 0;
}

async function publish(deps: DispatcherDeps, step: ClaimedStep): Promise<number> {
  const traceHeaders = step.traceParent
    ? injectTraceContext(headers(), contextFromTraceparent(step.traceParent))
    : headers();
  const ack = await publishDurable(
    deps.js,
    deps.catalog.subjects.step(step.resource, step.priority),
    encodeMessage({
      type: 'step.dispatch',
      task_id: step.taskId,
      step_seq: step.seq,
      dispatch: step.dispatch,
      tenant_id: step.tenantId,
      priority: step.priority,
      resource: step.resource,
    }),
    { msgID: dispatchMsgId(step.taskId, step.seq, step.dispatch), headers: traceHeaders },
  );
  return ack.seq;
}

/**
 * Publishing claimed steps: what the scheduler's dispatcher does with each claim, and the gateway
 * with the P0 steps a create claimed in its own transaction. Each step goes to its resource's
 * subject (one JetStream publication, acknowledged, de-duplicated by its dispatch's message id) in
 * a messaging `send` span (kind PRODUCER) of the task's trace, a child of the traceparent stored on
 * the task; its context is what the message's headers carry, so the executor's work on the step
 * continues from the dispatch that delivered it.
 *
 * The caller records the sequences of the published steps (for the reconciler) and puts the failed
 * ones back into the ready queue; a publication is never retried here.
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { priorityLabel, type Priority } from '@sluice/core';
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
  withContinuedSpan,
  type Logger,
  type Metrics,
  type Tracer,
} from '@sluice/telemetry';
import type { BusCatalog } from './catalog.js';
import { dispatchMsgId, encodeMessage } from './messages.js';
import { publishDurable } from './publish.js';
import { injectTraceContext } from './trace-headers.js';

/** The dispatch number of a publication (1 for the first; more after the reconciler's). */
export const ATTR_DISPATCH = 'sluice.step.dispatch';
/** The JetStream sequence the publication was stored at. */
export const ATTR_STREAM_SEQUENCE = 'sluice.jetstream.sequence';

/** A claimed step, as its publication needs it (the database's `ClaimedStep`). */
export interface StepToPublish {
  readonly id: number;
  readonly taskId: string;
  readonly seq: number;
  readonly name: string;
  readonly resource: string;
  readonly tenantId: string;
  readonly priority: Priority;
  readonly dispatch: number;
  /** W3C `traceparent` of the task: the send span continues the task's trace. */
  readonly traceParent: string | null;
}

/** One dispatch of a step, and where it went. */
export interface PublishedStep {
  readonly stepId: number;
  readonly dispatch: number;
  readonly resource: string;
  readonly priority: Priority;
  /** The JetStream sequence the message was stored at. */
  readonly publishSeq: number;
}

/** A dispatch whose publication failed: its step must go back to the ready queue. */
export type UnpublishedStep = Omit<PublishedStep, 'publishSeq'>;

export interface DispatchPublishDeps {
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  /** The publishing service's tracer (the send spans are its). */
  readonly tracer: Tracer;
  readonly log: Logger;
  /** Counts each stored publication (`stepsDispatched`, by resource and priority). */
  readonly metrics: Metrics;
  /** Sees each failed publication (a missing stream must be recreated before any can succeed). */
  readonly onPublishFailed?: (error: unknown) => void;
}

/**
 * Publishes every step at once; reports which were stored (counted as dispatched) and which failed
 * (logged as warnings).
 */
export async function publishClaimedSteps(
  deps: DispatchPublishDeps,
  steps: readonly StepToPublish[],
): Promise<{ published: PublishedStep[]; failed: UnpublishedStep[] }> {
  const results = await Promise.allSettled(steps.map((step) => publishStep(deps, step)));
  const published: PublishedStep[] = [];
  const failed: UnpublishedStep[] = [];
  results.forEach((result, index) => {
    const step = steps[index] as StepToPublish;
    const dispatch = {
      stepId: step.id,
      dispatch: step.dispatch,
      resource: step.resource,
      priority: step.priority,
    };
    if (result.status === 'fulfilled') {
      published.push({ ...dispatch, publishSeq: result.value });
      deps.metrics.stepsDispatched.inc({
        resource: step.resource,
        priority: priorityLabel(step.priority),
      });
    } else {
      failed.push(dispatch);
      deps.onPublishFailed?.(result.reason);
      deps.log.warn(
        { err: result.reason, task_id: step.taskId, step_seq: step.seq },
        'dispatch failed; the step goes back to the ready queue',
      );
    }
  });
  return { published, failed };
}

/** Publishes one step in its `send <subject>` span; answers the stream sequence. */
async function publishStep(deps: DispatchPublishDeps, step: StepToPublish): Promise<number> {
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
    deps.tracer,
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

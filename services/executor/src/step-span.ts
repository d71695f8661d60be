/**
 * The span of one step attempt, `sluice.step <name>`: a child of the scheduler's span that
 * dispatched it (its context comes in the NATS message's headers), or, for a message without one,
 * of the span that created the task (its `traceparent` is stored on the task row). Either way a
 * task is one trace across every step, however long it waits in between. The handler runs with it
 * as the active span, so its HTTP calls and LLM calls are spans under it.
 */
import {
  ATTR_RESOURCE,
  ATTR_STEP,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_FROM,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_TASK_TRANSITION,
  contextFromTraceparent,
} from '@sluice/telemetry';
import type { StepRecord, TaskRecord } from '@sluice/db';
import { SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { thrownMessage } from './classify-error.js';

/** The sequence of the step instance within its task. */
export const ATTR_STEP_SEQ = 'sluice.step.seq';
/** The attempt of the step instance (1 for the first). */
export const ATTR_STEP_ATTEMPT = 'sluice.step.attempt';

/**
 * Runs `fn` inside the step's span. A thrown error is recorded on the span (ERROR status) and
 * rethrown; the span ends in every case.
 *
 * The parent is given to the tracer explicitly: whatever span happens to be active in the
 * executor is not the step's parent. In a process that has not started tracing (`startTracing` of
 * `@sluice/telemetry`) the span is a no-op and carries no trace id.
 *
 * @param dispatched the trace context the dispatch message carried (`extractTraceContext` of
 *   `@sluice/bus` on its headers): the step's parent when it names a span; otherwise the task's
 *   stored `traceparent` is.
 */
export async function runInStepSpan<T>(
  task: TaskRecord,
  step: StepRecord,
  fn: (span: Span) => Promise<T>,
  dispatched?: Context,
): Promise<T> {
  const parent = parentOf(task, dispatched);
  const attributes = {
    [ATTR_TASK_ID]: task.id,
    [ATTR_TENANT]: task.tenantId,
    [ATTR_TASK_TYPE]: task.type,
    [ATTR_STEP]: step.name,
    [ATTR_RESOURCE]: step.resource,
    [ATTR_STEP_SEQ]: step.seq,
    [ATTR_STEP_ATTEMPT]: step.attempts,
  };
  const tracer = trace.getTracer('@sluice/executor');
  return tracer.startActiveSpan(
    `sluice.step ${step.name}`,
    { attributes },
    parent,
    async (span): Promise<T> => {
      try {
        return await fn(span);
      } catch (error) {
        recordFailure(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * Records on the step's span that its start also started the task (`start`: `queued` →
 * `running`), the one transition an executor applies; the others are the gateway's and the
 * scheduler's, recorded in their spans.
 */
export function recordTaskStarted(span: Span, step: StepRecord): void {
  span.addEvent(EVENT_TASK_TRANSITION, {
    [ATTR_TASK_EVENT]: 'start',
    [ATTR_TASK_STATUS_FROM]: 'queued',
    [ATTR_TASK_STATUS_TO]: 'running',
    [ATTR_STEP]: step.name,
  });
}

/** A span of the executor that applied a task's `complete` transition (see {@link recordTaskCompleted}). */
export const SPAN_COMPLETE_TASK = 'sluice.executor.complete_task';
/** A span of the executor that applied a task's `continue` transition (see {@link recordTaskContinued}). */
export const SPAN_CONTINUE_TASK = 'sluice.executor.continue_task';

/**
 * Records that the step's outcome completed its task (`complete`: `running` → `succeeded`): the
 * executor's outcome write applies the usual completion itself (`recordStepOutcomes`), so no
 * scheduler span records it. A short span of its own beside the step's (which has ended by then),
 * with the transition as its event, as the scheduler's `apply_outcome` span carries the transitions
 * it applies.
 */
export function recordTaskCompleted(
  task: TaskRecord,
  step: StepRecord,
  dispatched?: Context,
): void {
  recordAppliedTransition(SPAN_COMPLETE_TASK, task, step, dispatched, 'complete', 'succeeded');
}

/**
 * Records that the step's outcome continued its task (`continue`: `running` → `running`: its next
 * step, its fan-out's branches, or its branch's completion, with the join after the last), applied
 * by the executor's outcome write as {@link recordTaskCompleted} records a completion.
 */
export function recordTaskContinued(
  task: TaskRecord,
  step: StepRecord,
  dispatched?: Context,
): void {
  recordAppliedTransition(SPAN_CONTINUE_TASK, task, step, dispatched, 'continue', 'running');
}

/** A short span in the step's trace carrying the transition the executor applied, as its event. */
function recordAppliedTransition(
  name: string,
  task: TaskRecord,
  step: StepRecord,
  dispatched: Context | undefined,
  event: string,
  toStatus: string,
): void {
  const tracer = trace.getTracer('@sluice/executor');
  const span = tracer.startSpan(
    name,
    {
      attributes: {
        [ATTR_TASK_ID]: task.id,
        [ATTR_TENANT]: task.tenantId,
        [ATTR_TASK_TYPE]: task.type,
        [ATTR_STEP]: step.name,
        [ATTR_RESOURCE]: step.resource,
      },
    },
    parentOf(task, dispatched),
  );
  // As the scheduler records a transition: the step is the one whose outcome it applies.
  span.addEvent(EVENT_TASK_TRANSITION, {
    [ATTR_TASK_EVENT]: event,
    [ATTR_TASK_STATUS_FROM]: 'running',
    [ATTR_TASK_STATUS_TO]: toStatus,
    [ATTR_STEP]: step.name,
  });
  span.end();
}

/**
 * The parent of the executor's spans of a step: the dispatch's span when its message named one,
 * else the span that created the task. A task created without a trace has no parent: a malformed
 * (here empty) traceparent gives a context without one, so the step starts a trace of its own.
 */
function parentOf(task: TaskRecord, dispatched: Context | undefined): Context {
  return dispatched !== undefined && trace.getSpanContext(dispatched) !== undefined
    ? dispatched
    : contextFromTraceparent(task.traceParent ?? '');
}

/**
 * Marks the span failed with what the handler threw. The value may be of any shape (a getter that
 * throws, no prototype): nothing here may throw in its place, or the step would fail with the
 * span's problem instead of its own.
 */
function recordFailure(span: Span, error: unknown): void {
  const message = thrownMessage(error);
  try {
    span.recordException(error instanceof Error ? error : message);
  } catch {
    span.recordException(message);
  }
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

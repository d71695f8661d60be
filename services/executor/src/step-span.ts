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
  // A task created without a trace has no parent: a malformed (here empty) traceparent gives a
  // context without one, so the step starts a trace of its own.
  const parent =
    dispatched !== undefined && trace.getSpanContext(dispatched) !== undefined
      ? dispatched
      : contextFromTraceparent(task.traceParent ?? '');
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
        const message = error instanceof Error ? error.message : String(error);
        span.recordException(error instanceof Error ? error : message);
        span.setStatus({ code: SpanStatusCode.ERROR, message });
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

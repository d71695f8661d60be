/**
 * Builds the context a step handler receives: the task input and the step's input parsed with
 * their schemas, the outputs of the steps before it, the approval its task went through, progress
 * reporting, and the handles (signal, logger, LLM client) of this attempt. The span is added by
 * the runner, which starts it around the handler.
 */
import type { RecordedApproval, StepRecord, TaskRecord } from '@sluice/db';
import type {
  ApprovalDecision,
  LlmClient,
  StepContext,
  StepDefinition,
  TaskDefinition,
  UntypedOutputs,
} from '@sluice/sdk';
import type { Json } from '@sluice/core';
import type { Logger } from '@sluice/telemetry';
import type { ProgressReporter } from './progress-reporter.js';

/** What the step sees of its task's history, read in the transaction that started it. */
export interface StepHistory {
  /** The outputs of the steps before it, by name (see `outputsBefore`). */
  readonly outputs: Record<string, Json>;
  /** The latest approval of its task, if any. */
  readonly approval: RecordedApproval | undefined;
}

/** What the context is made of. */
export interface StepContextSources {
  readonly task: TaskRecord;
  readonly step: StepRecord;
  readonly history: StepHistory;
  readonly definition: TaskDefinition;
  readonly stepDefinition: StepDefinition;
  readonly signal: AbortSignal;
  readonly log: Logger;
  readonly llm: LlmClient;
  readonly progress: ProgressReporter;
  /** Whether the governor asks this task's priority to degrade. */
  readonly degraded: boolean;
}

/**
 * The context without its span.
 *
 * @throws ZodError when the task input or the step input does not match its schema (recorded as
 *   `schema_validation`: retrying cannot help).
 */
export function buildStepContext(sources: StepContextSources): Omit<StepContext, 'span'> {
  const { task, step, definition, stepDefinition } = sources;
  // Parsed, not just validated: defaults and transforms of the schemas apply, as the types say.
  const taskInput: unknown = definition.input.parse(task.input);
  // Typed by the handler as its schema's output; the runner only knows it is data.
  const input = (
    stepDefinition.input ? stepDefinition.input.parse(step.input) : step.input
  ) as Json;
  const { outputs, approval } = sources.history;
  const frozenOutputs: UntypedOutputs = Object.freeze({ ...outputs });
  const decision: ApprovalDecision | undefined = approval && {
    approved: true,
    comment: approval.comment,
    decidedAt: approval.decidedAt.toISOString(),
  };
  return {
    taskId: task.id,
    tenantId: task.tenantId,
    taskInput,
    input,
    outputs: frozenOutputs,
    outputOf(name) {
      if (!Object.hasOwn(frozenOutputs, name)) {
        throw new Error(
          `step ${step.name} needs the output of step ${name}, but no ${name} step succeeded before it`,
        );
      }
      return frozenOutputs[name] as Json;
    },
    step: { name: step.name, seq: step.seq },
    attempt: step.attempts,
    idempotencyKey: `${task.id}:${step.keySeq ?? step.seq}`,
    signal: sources.signal,
    logger: sources.log.child({ step: step.name, attempt: step.attempts }),
    llm: sources.llm,
    approval: decision,
    degraded: sources.degraded,
    progress: (fraction, message) => sources.progress.report(fraction, message),
  };
}

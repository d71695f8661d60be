/**
 * Task authoring: `defineTask` declares a task type — its name, version, input schema and named
 * steps, each on a resource — and step handlers say what comes next by returning `next(…)` or
 * `complete(…)`, or by throwing.
 */
import { z } from 'zod';
import {
  resourceProblem,
  stepNameProblem,
  taskTypeProblem,
  type Json,
  type StepOutcome,
} from '@sluice/core';
import type { StepContext } from './step-context.js';

/** What a step handler returns: the next step of the task, or its completion. */
export type StepResult =
  | { readonly type: 'next'; readonly step: string; readonly input: Json; readonly output: Json }
  | { readonly type: 'complete'; readonly output: Json };

/** Continue with `step`, giving it `input`. `output` is recorded as this step's result. */
export function next(step: string, input: Json, output: Json = null): StepResult {
  return { type: 'next', step, input, output };
}

/** The task succeeded with `output`. */
export function complete(output: Json): StepResult {
  return { type: 'complete', output };
}

/** Defaults of a step's policy. */
export const DEFAULT_STEP_TIMEOUT_MS = 60_000;
export const DEFAULT_STEP_MAX_ATTEMPTS = 3;

/** One step of a task type. */
export interface StepDefinition<Input> {
  /** The resource the step needs: `llm`, `browser`, `file`, `db`, `mcp:<server>`, `tool:<name>`. */
  readonly resource: string;
  /** How long one attempt may run before it is aborted (default 60 s). */
  readonly timeoutMs?: number;
  /** Attempts before the step fails for good (default 3). */
  readonly maxAttempts?: number;
  readonly run: (ctx: StepContext<Input>) => Promise<StepResult>;
}

/** What `defineTask` takes. */
export interface TaskDefinitionSpec<Schema extends z.ZodType> {
  readonly name: string;
  /** Increment when the input schema or the steps change incompatibly; tasks pin their version. */
  readonly version: number;
  readonly description?: string;
  readonly input: Schema;
  /** The step every task starts with. */
  readonly firstStep: string;
  readonly steps: Readonly<Record<string, StepDefinition<z.infer<Schema>>>>;
}

/** A validated task type, ready to be registered and run by executors. */
export interface TaskDefinition<Schema extends z.ZodType = z.ZodType> {
  readonly kind: 'sluice.task-definition';
  readonly name: string;
  readonly version: number;
  readonly description: string;
  readonly input: Schema;
  /** JSON Schema of the input, registered in the manifest for the gateway to validate against. */
  readonly inputJsonSchema: Record<string, unknown>;
  readonly firstStep: string;
  readonly steps: Readonly<Record<string, StepDefinition<z.infer<Schema>>>>;
}

/**
 * Declares a task type. Throws at definition time when a name, resource or step reference is
 * invalid, so a broken definition never reaches an executor's queue.
 */
export function defineTask<Schema extends z.ZodType>(
  spec: TaskDefinitionSpec<Schema>,
): TaskDefinition<Schema> {
  const problems: string[] = [];
  const typeProblem = taskTypeProblem(spec.name);
  if (typeProblem) problems.push(typeProblem);
  if (!Number.isInteger(spec.version) || spec.version < 1) {
    problems.push('version must be a positive integer');
  }
  for (const [name, step] of Object.entries(spec.steps)) {
    const nameProblem = stepNameProblem(name);
    if (nameProblem) problems.push(nameProblem);
    const resource = resourceProblem(step.resource);
    if (resource) problems.push(`step ${name}: ${resource}`);
    if (step.timeoutMs !== undefined && !(step.timeoutMs > 0)) {
      problems.push(`step ${name}: timeoutMs must be positive`);
    }
    if (
      step.maxAttempts !== undefined &&
      !(Number.isInteger(step.maxAttempts) && step.maxAttempts >= 1)
    ) {
      problems.push(`step ${name}: maxAttempts must be an integer ≥ 1`);
    }
  }
  if (!(spec.firstStep in spec.steps)) problems.push(`firstStep ${spec.firstStep} is not a step`);
  if (problems.length > 0) {
    throw new Error(`invalid task definition ${String(spec.name)}: ${problems.join('; ')}`);
  }
  return {
    kind: 'sluice.task-definition',
    name: spec.name,
    version: spec.version,
    description: spec.description ?? '',
    input: spec.input,
    inputJsonSchema: z.toJSONSchema(spec.input, { io: 'input' }),
    firstStep: spec.firstStep,
    steps: spec.steps,
  };
}

/** True for a value made by {@link defineTask} (used when loading user modules). */
export function isTaskDefinition(value: unknown): value is TaskDefinition {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'sluice.task-definition'
  );
}

/** A step result as the outcome recorded in Postgres. */
export function toStepOutcome(result: StepResult): StepOutcome {
  switch (result.type) {
    case 'next':
      return { type: 'next', step: result.step, input: result.input, output: result.output };
    case 'complete':
      return { type: 'complete', output: result.output };
  }
}

/**
 * Task authoring: `defineTask` declares a task type — its name, version, input schema, its steps
 * (each on a resource, with a timeout, retry overrides and optional input/output schemas) and one
 * handler per step.
 *
 * Why steps and handlers are two maps: a handler's types depend on every step of the task (the
 * names `next` may use, their inputs, the outputs of the others), and TypeScript fixes a type
 * parameter as soon as it has to type a callback's parameter. Declaring the steps first, as plain
 * data, lets it infer them all before it types any handler; the handlers then get real types.
 */
import { z } from 'zod';
import { resourceProblem, stepNameProblem, taskTypeProblem, type Json } from '@sluice/core';
import type { StepContext } from './step-context.js';
import type {
  AwaitApprovalResult,
  Branch,
  CompleteResult,
  FanOutResult,
  NextResult,
  StepResult,
} from './step-result.js';

/** Defaults of a step's policy. */
export const DEFAULT_STEP_TIMEOUT_MS = 60_000;
export const DEFAULT_STEP_MAX_ATTEMPTS = 3;

/** Longest timeout a step may declare (24 h); longer waits are approvals, not running steps. */
export const MAX_STEP_TIMEOUT_MS = 24 * 60 * 60 * 1_000;
/** Most attempts a step may declare. */
export const MAX_STEP_ATTEMPTS = 100;

/** How a step is declared in `defineTask({ steps })`. */
export interface StepDeclaration {
  /** The resource the step needs: `llm`, `browser`, `file`, `db`, `mcp:<server>`, `tool:<name>`. */
  readonly resource: string;
  /**
   * How long one attempt may run before it is aborted (default 60 s): its signal aborts, and a
   * handler that has not returned 5 s later is given up on (its result discarded) and the attempt
   * fails as `tool_timeout`.
   */
  readonly timeoutMs?: number;
  /** Attempts before the step fails for good (default 3). */
  readonly maxAttempts?: number;
  /**
   * The step's input: `ctx.input` is parsed with it (a mismatch fails the step as
   * `schema_validation`), and `next`/`fanOut` are type-checked against it. Without it the input
   * is untyped JSON.
   */
  readonly input?: z.ZodType;
  /**
   * The step's output: what it returns as `output` is validated with it when it finishes, and later
   * steps see it typed in `ctx.outputs`. Without it the output is untyped JSON.
   */
  readonly output?: z.ZodType;
  /**
   * The step's own retry backoff (full jitter up to `baseDelayMs × 2^(attempt−1)`, capped at
   * `maxDelayMs`), replacing its error class's for the fields given. Whether a failure is retried
   * at all stays the class's decision; `Retry-After` is still honoured.
   */
  readonly backoff?: StepBackoff;
  /**
   * A step of this task that repairs this one when it fails `schema_validation` (its result or
   * input did not match a schema): it runs next, in this step's place, with `repairInput()` as its
   * input (this step's input, what it returned, the validation error), and what it returns
   * continues the task as this step's result would have. At most `maxAttempts` repairs of this
   * step per task; without a repair step such a failure ends the task (`failed_terminal`).
   */
  readonly repairStep?: string;
  /**
   * What happens to the step while its resource's circuit breaker is open. `wait` (the default):
   * it is not dispatched and waits in the ready queue, costing no attempt, until the breaker lets
   * calls through again. `fail`: it fails fast as retryable (`external_5xx`, "circuit breaker of
   * <resource> is open") without running, which counts an attempt; it is retried after its backoff
   * (at the earliest when the breaker's cool-down ends, and then it waits for the half-open probes)
   * and fails for good when its attempts run out — for a task that would rather fail than wait out
   * an outage.
   */
  readonly whileBreakerOpen?: WhileBreakerOpen;
}

/** What a step does while its resource's circuit breaker is open (see `whileBreakerOpen`). */
export type WhileBreakerOpen = 'wait' | 'fail';

/** Every {@link WhileBreakerOpen} choice. */
export const WHILE_BREAKER_OPEN: readonly WhileBreakerOpen[] = ['wait', 'fail'];

/** A step's backoff override, in milliseconds. */
export interface StepBackoff {
  readonly baseDelayMs?: number;
  readonly maxDelayMs?: number;
}

/** Longest backoff delay a step may declare (1 h). */
export const MAX_STEP_BACKOFF_MS = 60 * 60 * 1_000;

// ---- Types derived from the declared steps ----------------------------------------------------

/** The step names of a task. */
export type StepName<Steps> = keyof Steps & string;

/** What a step's handler receives as `ctx.input`. */
export type StepInput<S> = S extends { readonly input: infer Z extends z.ZodType }
  ? z.output<Z>
  : Json;
/** What `next`/`fanOut` must pass to a step. */
export type StepInputArg<S> = S extends { readonly input: infer Z extends z.ZodType }
  ? z.input<Z>
  : unknown;
/** A step's stored output, as later steps see it. */
export type StepOutput<S> = S extends { readonly output: infer Z extends z.ZodType }
  ? z.output<Z>
  : Json;
/** What a step's handler must give as its output. */
export type StepOutputArg<S> = S extends { readonly output: infer Z extends z.ZodType }
  ? z.input<Z>
  : unknown;

/** `ctx.outputs` of a task's steps: every step's output, each possibly absent. */
export type StepOutputs<Steps> = { readonly [K in StepName<Steps>]?: StepOutput<Steps[K]> };

/** Any step of the task with an input for it (a `next` target or a fan-out branch). */
type CallOf<Steps> = { [K in StepName<Steps>]: Branch<K, StepInputArg<Steps[K]>> }[StepName<Steps>];
type NextOf<Steps, Output> = {
  [K in StepName<Steps>]: NextResult<K, StepInputArg<Steps[K]>, Output>;
}[StepName<Steps>];
type FanOutOf<Steps, Output> = FanOutResult<CallOf<Steps>, StepName<Steps>, Output>;

/** Everything the handler of step `K` may return. */
export type StepResultOf<Steps, K extends keyof Steps> =
  | NextOf<Steps, StepOutputArg<Steps[K]>>
  | FanOutOf<Steps, StepOutputArg<Steps[K]>>
  | CompleteResult<StepOutputArg<Steps[K]>>
  | AwaitApprovalResult<NextOf<Steps, never> | FanOutOf<Steps, never>, StepOutputArg<Steps[K]>>;

/** The handler of step `K` of a task whose input is `TaskInput` (async, or not). */
export type StepHandler<TaskInput, Steps, K extends keyof Steps> = (
  ctx: StepContext<TaskInput, StepInput<Steps[K]>, StepOutputs<Steps>>,
) => Promise<StepResultOf<Steps, K>> | StepResultOf<Steps, K>;

/** One handler per declared step. */
export type StepHandlers<TaskInput, Steps> = {
  readonly [K in keyof Steps]: StepHandler<TaskInput, Steps, K>;
};

/** What `defineTask` takes. */
export interface TaskSpec<
  Schema extends z.ZodType,
  Steps extends Readonly<Record<string, StepDeclaration>>,
> {
  /** The task type's name, as clients give it to `CreateTask`. */
  readonly name: string;
  /** Increment when the input schema or the steps change incompatibly; tasks pin their version. */
  readonly version: number;
  readonly description?: string;
  /** The task input. Its JSON Schema is registered, and the gateway validates inputs with it. */
  readonly input: Schema;
  /** The step every task starts with (it receives the task input as its input). */
  readonly firstStep: NoInfer<StepName<Steps>>;
  /** The steps, by name: where each runs and what it takes and gives. */
  readonly steps: Steps;
  /** What each step does. */
  readonly handlers: NoInfer<StepHandlers<z.output<Schema>, Steps>>;
}

// ---- The definition executors load ------------------------------------------------------------

/** One step as executors run it: its declaration and its handler. */
export interface StepDefinition<TaskInput = unknown> extends StepDeclaration {
  // Method syntax on purpose: a handler typed for its own task must be assignable here.
  run(ctx: StepContext<TaskInput>): Promise<StepResult> | StepResult;
}

/** A validated task type, ready to be registered and run by executors. */
export interface TaskDefinition<Schema extends z.ZodType = z.ZodType> {
  readonly kind: 'sluice.task-definition';
  readonly name: string;
  readonly version: number;
  readonly description: string;
  readonly input: Schema;
  /** JSON Schema (draft 2020-12) of the input, registered for the gateway to validate against. */
  readonly inputJsonSchema: Record<string, unknown>;
  readonly firstStep: string;
  readonly steps: Readonly<Record<string, StepDefinition<z.output<Schema>>>>;
}

/**
 * Declares a task type.
 *
 * Types flow from the declarations into the handlers: `ctx.taskInput` is the parsed task input,
 * `ctx.input` the step's declared input, `ctx.outputs` every step's declared output (possibly
 * absent), and the values the handler returns are checked against the step names and schemas.
 * Everything is checked again at run time, so a definition loaded from plain JavaScript is as safe.
 *
 * @throws Error at definition time naming every problem: an invalid name, resource, version or
 *   policy, a missing or extra handler, a `firstStep` that is not a step, a schema that is not zod.
 *
 * @example
 * ```ts
 * export const summarize = defineTask({
 *   name: 'summarize',
 *   version: 1,
 *   input: z.object({ url: z.url() }),
 *   firstStep: 'fetch',
 *   steps: {
 *     fetch: { resource: 'tool:http', timeoutMs: 30_000, output: z.object({ chars: z.number() }) },
 *     write: { resource: 'llm', input: z.object({ text: z.string() }) },
 *   },
 *   handlers: {
 *     async fetch(ctx) {
 *       const text = await (await fetch(ctx.taskInput.url, { signal: ctx.signal })).text();
 *       return next('write', { text }, { chars: text.length });
 *     },
 *     async write(ctx) {
 *       const chars = ctx.outputOf('fetch').chars; // typed: number
 *       const answer = await ctx.llm.chat({ messages: [{ role: 'user', content: ctx.input.text }] });
 *       return complete({ summary: answer.content, chars });
 *     },
 *   },
 * });
 * ```
 */
export function defineTask<
  Schema extends z.ZodType,
  const Steps extends Readonly<Record<string, StepDeclaration>>,
>(spec: TaskSpec<Schema, Steps>): TaskDefinition<Schema> {
  const problems = definitionProblems(spec);
  if (problems.length > 0) {
    throw new Error(`invalid task definition ${String(spec.name)}: ${problems.join('; ')}`);
  }
  const handlers = spec.handlers as Readonly<Record<string, StepDefinition['run']>>;
  const steps: Record<string, StepDefinition<z.output<Schema>>> = {};
  for (const [name, declaration] of Object.entries(spec.steps)) {
    const run = handlers[name];
    if (run) steps[name] = { ...declaration, run };
  }
  let inputJsonSchema: Record<string, unknown>;
  try {
    inputJsonSchema = z.toJSONSchema(spec.input, { io: 'input' });
  } catch (error) {
    // e.g. a transform or a date: the gateway could not check such an input.
    throw new Error(
      `invalid task definition ${spec.name}: the input schema has no JSON Schema (${String(error)})`,
      { cause: error },
    );
  }
  return {
    kind: 'sluice.task-definition',
    name: spec.name,
    version: spec.version,
    description: spec.description ?? '',
    input: spec.input,
    inputJsonSchema,
    firstStep: spec.firstStep,
    steps: Object.freeze(steps),
  };
}

/** A spec as plain JavaScript may pass it. */
type LooseSpec = { readonly [K in keyof TaskSpec<z.ZodType, Record<string, never>>]: unknown };

/** Every problem of a spec, checked without trusting its static type (it may come from JS). */
function definitionProblems(spec: LooseSpec): string[] {
  const problems: string[] = [];
  const typeProblem = taskTypeProblem(spec.name);
  if (typeProblem) problems.push(typeProblem);
  if (!Number.isInteger(spec.version) || Number(spec.version) < 1) {
    problems.push('version must be a positive integer');
  }
  if (!isZodSchema(spec.input)) problems.push('input must be a zod schema');
  const steps: Record<string, unknown> = isObject(spec.steps) ? spec.steps : {};
  const handlers: Record<string, unknown> = isObject(spec.handlers) ? spec.handlers : {};
  if (!isObject(spec.steps)) problems.push('steps must be an object of step declarations');
  if (!isObject(spec.handlers)) problems.push('handlers must be an object of step handlers');
  for (const [name, step] of Object.entries(steps)) {
    problems.push(...stepProblems(name, step));
    if (isObject(step) && step.repairStep !== undefined) {
      const repair = step.repairStep;
      if (typeof repair !== 'string' || !Object.hasOwn(steps, repair)) {
        problems.push(`step ${name}: repairStep ${JSON.stringify(repair)} is not a step`);
      } else if (repair === name) {
        problems.push(`step ${name}: a step cannot be its own repairStep`);
      }
    }
    // Own handlers only: `toString`, `constructor`… are functions every object inherits.
    if (!Object.hasOwn(handlers, name) || typeof handlers[name] !== 'function') {
      problems.push(`step ${name} has no handler`);
    }
  }
  for (const name of Object.keys(handlers)) {
    if (!Object.hasOwn(steps, name)) problems.push(`handler ${name} has no step declaration`);
  }
  if (Object.keys(steps).length === 0) problems.push('a task needs at least one step');
  if (typeof spec.firstStep !== 'string' || !Object.hasOwn(steps, spec.firstStep)) {
    problems.push(`firstStep ${String(spec.firstStep)} is not a step`);
  }
  return problems;
}

function stepProblems(name: string, step: unknown): string[] {
  const problems: string[] = [];
  const nameProblem = stepNameProblem(name);
  if (nameProblem) problems.push(nameProblem);
  if (!isObject(step)) return [...problems, `step ${name} must be an object`];
  const resource = resourceProblem(step.resource);
  if (resource) problems.push(`step ${name}: ${resource}`);
  const { timeoutMs, maxAttempts } = step;
  if (
    timeoutMs !== undefined &&
    !(
      Number.isInteger(timeoutMs) &&
      Number(timeoutMs) >= 1 &&
      Number(timeoutMs) <= MAX_STEP_TIMEOUT_MS
    )
  ) {
    problems.push(`step ${name}: timeoutMs must be an integer from 1 to ${MAX_STEP_TIMEOUT_MS}`);
  }
  if (
    maxAttempts !== undefined &&
    !(
      Number.isInteger(maxAttempts) &&
      Number(maxAttempts) >= 1 &&
      Number(maxAttempts) <= MAX_STEP_ATTEMPTS
    )
  ) {
    problems.push(`step ${name}: maxAttempts must be an integer from 1 to ${MAX_STEP_ATTEMPTS}`);
  }
  if (step.backoff !== undefined) problems.push(...backoffProblems(name, step.backoff));
  const { whileBreakerOpen } = step;
  if (
    whileBreakerOpen !== undefined &&
    !(WHILE_BREAKER_OPEN as readonly unknown[]).includes(whileBreakerOpen)
  ) {
    problems.push(
      `step ${name}: whileBreakerOpen must be one of ${WHILE_BREAKER_OPEN.map((c) => `"${c}"`).join(', ')}`,
    );
  }
  for (const key of ['input', 'output'] as const) {
    if (step[key] !== undefined && !isZodSchema(step[key])) {
      problems.push(`step ${name}: ${key} must be a zod schema`);
    }
  }
  return problems;
}

function backoffProblems(name: string, backoff: unknown): string[] {
  if (!isObject(backoff)) return [`step ${name}: backoff must be an object`];
  const problems: string[] = [];
  for (const [key, value] of Object.entries(backoff)) {
    if (key !== 'baseDelayMs' && key !== 'maxDelayMs') {
      problems.push(`step ${name}: backoff has no field ${key}`);
    } else if (
      value !== undefined &&
      !(Number.isInteger(value) && Number(value) >= 0 && Number(value) <= MAX_STEP_BACKOFF_MS)
    ) {
      problems.push(
        `step ${name}: backoff.${key} must be an integer from 0 to ${MAX_STEP_BACKOFF_MS}`,
      );
    }
  }
  return problems;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Duck-typed, so schemas from another copy of zod 4 are accepted. */
function isZodSchema(value: unknown): value is z.ZodType {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { safeParse?: unknown }).safeParse === 'function' &&
    '_zod' in value
  );
}

/**
 * The input schema of a join step: `{ outputs: [...] }` with one output of `branchOutput` per
 * branch, in branch order.
 *
 * @example steps: { summarize: { resource: 'llm', input: joinInput(pageSchema) } }
 */
export function joinInput<Output extends z.ZodType>(branchOutput: Output) {
  return z.object({ outputs: z.array(branchOutput) });
}

/**
 * The input schema of a repair step (see `repairStep`): which step failed (`repairOf`), its input,
 * what its handler returned (`null` when nothing usable) and the validation error.
 *
 * @example steps: { draft: { resource: 'llm', output: answer, repairStep: 'fixDraft' },
 *                   fixDraft: { resource: 'llm', input: repairInput() } }
 */
export function repairInput() {
  return z.object({
    repairOf: z.string(),
    input: z.json(),
    result: z.json(),
    error: z.string(),
  });
}

/** True for a value made by {@link defineTask} (used when loading user modules). */
export function isTaskDefinition(value: unknown): value is TaskDefinition {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { kind?: unknown }).kind === 'sluice.task-definition'
  );
}

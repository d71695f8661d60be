/**
 * Turns what a step handler returned into the outcome recorded in Postgres, checking at run time
 * everything the types check at compile time (and what they cannot): step names, inputs against
 * the target steps' schemas, this step's output against its schema, JSON-ness, fan-out and
 * approval limits. A handler written in plain JavaScript is therefore as safe as a typed one.
 */
import type { z } from 'zod';
import {
  MAX_APPROVAL_TIMEOUT_MS,
  MAX_FAN_OUT_BRANCHES,
  type Continuation,
  type Json,
  type StepCall,
  type StepOutcome,
  unstorableCharacter,
} from '@sluice/core';
import type { StepDeclaration, TaskDefinition } from './define-task.js';
import { toJson, unstorableCharacterWords } from './json.js';
import { STEP_RESULT_TYPES } from './step-result.js';

/** Longest approval prompt, in characters (code points). */
export const MAX_APPROVAL_PROMPT_CHARS = 10_000;

/**
 * A step returned something Sluice cannot record: an unknown step, an input or output that does
 * not match its schema, a value that is not JSON, a fan-out or approval out of bounds. It is a bug
 * of the task type, not a passing failure: the executor records it as `schema_validation`, which
 * is not retried.
 */
export class StepResultError extends Error {
  override readonly name = 'StepResultError';
  /** The error class the executor records. */
  readonly errorClass = 'schema_validation';
}

/** Where the result comes from. */
export interface StepResultOrigin {
  readonly definition: TaskDefinition;
  /** The step whose handler returned the result. */
  readonly step: string;
  /** True when that step runs in a branch of a fan-out (a branch cannot fan out again). */
  readonly inBranch?: boolean;
}

/**
 * The outcome to record for `result`.
 *
 * @throws StepResultError naming the problem.
 */
export function toStepOutcome(result: unknown, origin: StepResultOrigin): StepOutcome {
  const fail = (problem: string): never => {
    throw new StepResultError(`step ${origin.step} returned ${problem}`);
  };
  if (!isRecord(result) || !STEP_RESULT_TYPES.some((type) => type === result.type)) {
    return fail(
      `${describe(result)}; a handler returns next(…), fanOut(…), complete(…) or awaitApproval(…)`,
    );
  }
  const declaration = stepOf(origin.definition, origin.step);
  if (!declaration) return fail('a result, but the task type declares no such step');
  const output = checkedValue(declaration.output, result.output, 'an output', 'parsed', fail);
  switch (result.type) {
    case 'next':
    case 'fanOut':
      return { ...continuationOf(result, origin, fail), output };
    case 'complete':
      return { type: 'complete', output };
    case 'awaitApproval':
      return { type: 'awaitApproval', output, ...approvalOf(result, origin, fail) };
    default:
      return fail(`a result of unknown type ${String(result.type)}`);
  }
}

type Fail = (problem: string) => never;

function approvalOf(
  result: Record<string, unknown>,
  origin: StepResultOrigin,
  fail: Fail,
): Pick<
  Extract<StepOutcome, { type: 'awaitApproval' }>,
  'prompt' | 'timeoutMs' | 'onTimeout' | 'then'
> {
  const { prompt, timeoutMs, onTimeout, then } = result;
  // A person decides about a task, not about one of its parallel branches (the scheduler refuses
  // it too).
  if (origin.inBranch) return fail('an approval from inside a fan-out branch');
  if (typeof prompt !== 'string' || prompt.trim() === '') {
    return fail('an approval without a prompt');
  }
  // Characters (code points): `length` counts an emoji or a CJK extension character twice.
  if (prompt.length > MAX_APPROVAL_PROMPT_CHARS && [...prompt].length > MAX_APPROVAL_PROMPT_CHARS) {
    return fail(`an approval prompt longer than ${MAX_APPROVAL_PROMPT_CHARS} characters`);
  }
  // Stored as jsonb with the outcome, which cannot hold these: the executor's group write of
  // outcomes would fail for every step in it, and the step would run again.
  const unstorable = unstorableCharacter(prompt);
  if (unstorable !== undefined) {
    const what = unstorableCharacterWords(unstorable);
    return fail(`an approval prompt holding ${what}, which cannot be stored`);
  }
  if (
    typeof timeoutMs !== 'number' ||
    !Number.isInteger(timeoutMs) ||
    timeoutMs < 1 ||
    timeoutMs > MAX_APPROVAL_TIMEOUT_MS
  ) {
    return fail(
      `an approval timeout of ${String(timeoutMs)} ms; it must be an integer from 1 to ${MAX_APPROVAL_TIMEOUT_MS}`,
    );
  }
  if (onTimeout !== 'pause' && onTimeout !== 'cancel') {
    return fail(`an approval onTimeout of ${String(onTimeout)}; it must be 'pause' or 'cancel'`);
  }
  if (!isRecord(then) || (then.type !== 'next' && then.type !== 'fanOut')) {
    return fail('an approval whose `then` is not next(…) or fanOut(…)');
  }
  if (then.output !== undefined) {
    return fail('an output inside the approval’s `then`; give it to awaitApproval({ output })');
  }
  return { prompt, timeoutMs, onTimeout, then: continuationOf(then, origin, fail) };
}

function continuationOf(
  result: Record<string, unknown>,
  origin: StepResultOrigin,
  fail: Fail,
): Continuation {
  if (result.type === 'next') {
    return { type: 'next', ...callOf(result, origin.definition, 'next', fail) };
  }
  if (origin.inBranch) return fail('a fan-out from inside a fan-out branch, which cannot nest');
  const { branches, join } = result;
  if (!Array.isArray(branches)) return fail('a fan-out whose branches are not an array');
  if (branches.length < 1 || branches.length > MAX_FAN_OUT_BRANCHES) {
    return fail(`a fan-out of ${branches.length} branches; it needs 1 to ${MAX_FAN_OUT_BRANCHES}`);
  }
  if (typeof join !== 'string' || !stepOf(origin.definition, join)) {
    return fail(`a fan-out joined by ${describeName(join)}, which is not a step of this task`);
  }
  const calls: StepCall[] = branches.map((branch: unknown, index) =>
    isRecord(branch)
      ? callOf(branch, origin.definition, `branch ${index}`, fail)
      : fail(`branch ${index} that is not a { step, input } object`),
  );
  return { type: 'fanOut', branches: calls, join };
}

function callOf(
  call: Record<string, unknown>,
  definition: TaskDefinition,
  what: string,
  fail: Fail,
): StepCall {
  const { step, input } = call;
  const target = typeof step === 'string' ? stepOf(definition, step) : undefined;
  if (typeof step !== 'string' || !target) {
    return fail(`${what} to ${describeName(step)}, which is not a step of this task`);
  }
  const checked = checkedValue(target.input, input, `the input of ${what} to ${step}`, 'raw', fail);
  return { step, input: checked };
}

/**
 * Checks `value` against `schema` (when declared) and that it is JSON. Returns the value to store:
 * the raw value, not the parsed one, for inputs (the receiving step parses it, and parsing twice
 * is not safe with transforms); the parsed one for outputs (what later steps are typed to see).
 */
function checkedValue(
  schema: z.ZodType | undefined,
  value: unknown,
  what: string,
  keep: 'raw' | 'parsed',
  fail: Fail,
): Json {
  let stored = value;
  if (schema) {
    const parsed = schema.safeParse(value);
    if (!parsed.success) {
      return fail(`${what} that does not match its schema: ${issuesOf(parsed.error)}`);
    }
    if (keep === 'parsed') stored = parsed.data;
  }
  const json = toJson(stored);
  if (!json.ok) return fail(`${what} that is not JSON: ${json.problem}`);
  return json.value;
}

function stepOf(definition: TaskDefinition, name: string): StepDeclaration | undefined {
  return Object.hasOwn(definition.steps, name) ? definition.steps[name] : undefined;
}

/** Zod issues as one line: `items[2].url: Invalid URL; name: Required`. */
export function issuesOf(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => {
      const path = issue.path.map(String).join('.');
      return path === '' ? issue.message : `${path}: ${issue.message}`;
    })
    .join('; ')
    .concat(error.issues.length > 5 ? ` (and ${error.issues.length - 5} more)` : '');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (isRecord(value)) return `an object of type ${describeName(value.type)}`;
  return `a ${typeof value}`;
}

function describeName(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

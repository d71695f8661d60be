/**
 * What a step handler returns, and the functions that build it: `next`, `fanOut` (with `branch`),
 * `complete` and `awaitApproval`.
 *
 * The builders are plain functions, but inside a handler of `defineTask` they are typed by the
 * handler's expected result: TypeScript infers their first type parameter from the place the call
 * is returned, so a step name that does not exist, an input that does not match the target step's
 * schema, or an output that does not match this step's schema is a compile error at the argument,
 * and the editor completes step names. Called anywhere else they accept any name and value; the
 * executor checks everything again when the result comes back (see `toStepOutcome`).
 */
import type { ApprovalTimeoutAction } from '@sluice/core';

/** One step to start, with its input: a branch of a fan-out. */
export interface Branch<Step extends string = string, Input = unknown> {
  readonly step: Step;
  readonly input: Input;
}

/** Continue with `step`. */
export interface NextResult<Step extends string = string, Input = unknown, Output = unknown> {
  readonly type: 'next';
  readonly step: Step;
  readonly input: Input;
  /** This step's own output (kept on its row, seen by later steps); `null` when absent. */
  readonly output?: Output;
}

/** Run `branches` in parallel, then `join` once with `{ outputs: [...] }` in branch order. */
export interface FanOutResult<
  B extends Branch = Branch,
  Join extends string = string,
  Output = unknown,
> {
  readonly type: 'fanOut';
  readonly branches: readonly B[];
  readonly join: Join;
  readonly output?: Output;
}

/** The task (or, inside a fan-out branch, the branch) is done; `output` is its result. */
export interface CompleteResult<Output = unknown> {
  readonly type: 'complete';
  readonly output: Output;
}

/** Stop until a person decides; once approved, `then` runs. */
export interface AwaitApprovalResult<
  Then extends NextResult | FanOutResult = NextResult | FanOutResult,
  Output = unknown,
> {
  readonly type: 'awaitApproval';
  /** What the person is asked (shown by `GetTask` and the CLI). */
  readonly prompt: string;
  /** How long to wait, from 1 ms to `MAX_APPROVAL_TIMEOUT_MS` (30 days). */
  readonly timeoutMs: number;
  /** What happens when nobody decides in time: the task is paused, or cancelled. */
  readonly onTimeout: ApprovalTimeoutAction;
  readonly then: Then;
  readonly output?: Output;
}

/** Any result of a step handler. */
export type StepResult = NextResult | FanOutResult | CompleteResult | AwaitApprovalResult;

/** The names of the step types a result may take, for checks on untyped values. */
export const STEP_RESULT_TYPES = ['next', 'fanOut', 'complete', 'awaitApproval'] as const;

// ---- Type-level plumbing of the builders -------------------------------------------------------
// `R` below is the result type expected where the builder is called (a handler's union of allowed
// results). Without such a context TypeScript infers `unknown` (or `any`, e.g. as an argument of
// `assert.deepEqual`), and the builders fall back to the untyped results. Each helper therefore
// starts with `unknown extends R`, and otherwise is a conditional on R itself: that is what lets
// TypeScript infer R from the expected type in the first place.
type NextIn<R> = unknown extends R ? NextResult : R extends { readonly type: 'next' } ? R : never;
type NextStepIn<R> = NextIn<R> extends { readonly step: infer S extends string } ? S : never;
/** The `next` member(s) of `R` whose step name accepts `S`. */
type NextFor<R, S> = unknown extends R
  ? NextResult<S & string>
  : R extends { readonly type: 'next'; readonly step: infer N }
    ? S extends N
      ? R
      : never
    : never;
type FanOutIn<R> = unknown extends R
  ? FanOutResult
  : R extends { readonly type: 'fanOut' }
    ? R
    : never;
type BranchIn<R> = R extends { readonly branches: ReadonlyArray<infer B> } ? B : never;
type JoinIn<R> = R extends { readonly join: infer J extends string } ? J : never;
type BranchStepIn<C> = unknown extends C
  ? string
  : C extends { readonly step: infer S extends string }
    ? S
    : never;
type BranchFor<C, S> = unknown extends C
  ? Branch<S & string>
  : C extends { readonly step: infer N }
    ? S extends N
      ? C
      : never
    : never;
type CompleteIn<R> = unknown extends R
  ? CompleteResult
  : R extends { readonly type: 'complete' }
    ? R
    : never;
type ApprovalIn<R> = unknown extends R
  ? AwaitApprovalResult
  : R extends { readonly type: 'awaitApproval' }
    ? R
    : never;
type InputOf<C> = C extends { readonly input: infer I } ? I : never;
/**
 * The output type a result was built for, read from its type argument: inferred from the optional
 * `output` property instead, `undefined` is dropped (an output schema that accepts it, e.g.
 * `.optional()`, then made the output required).
 */
type OutputOf<C> =
  C extends NextResult<string, unknown, infer O>
    ? O
    : C extends FanOutResult<Branch, string, infer O>
      ? O
      : C extends CompleteResult<infer O>
        ? O
        : C extends AwaitApprovalResult<NextResult | FanOutResult, infer O>
          ? O
          : never;

/**
 * The trailing `output` parameter: required when the step declares an output schema that does not
 * accept `undefined`, optional otherwise, and only `undefined` where no output belongs (`then`).
 */
type OutputParam<O> = [O] extends [never] ? [] : undefined extends O ? [output?: O] : [output: O];

/** The `output` property of an `awaitApproval` request, by the same rule. */
type OutputProperty<O> = [O] extends [never]
  ? unknown
  : undefined extends O
    ? { readonly output?: O }
    : { readonly output: O };

/** What {@link awaitApproval} takes. */
export type ApprovalRequest<R = StepResult> = {
  readonly prompt: string;
  readonly timeoutMs: number;
  readonly onTimeout: ApprovalTimeoutAction;
  /** What runs once approved: `next(…)` or `fanOut(…)` (without an output of their own). */
  readonly then: ApprovalIn<R> extends { readonly then: infer T } ? T : never;
} & OutputProperty<OutputOf<ApprovalIn<R>>>;

// ---- Builders ----------------------------------------------------------------------------------

/**
 * Continue with `step`, giving it `input`. `output` is this step's own result: kept on its row and
 * seen by later steps in `ctx.outputs`.
 *
 * @example return next('fetchSource', { url }, { outline });
 */
export function next<R = StepResult, const S extends NextStepIn<R> = NextStepIn<R>>(
  step: S,
  input: InputOf<NextFor<R, S>>,
  ...output: OutputParam<OutputOf<NextFor<R, S>>>
): NextFor<R, S> {
  return { type: 'next', step, input, output: output[0] } as unknown as NextFor<R, S>;
}

/**
 * Run `branches` in parallel — each a step on its own resource, which may continue with `next`
 * inside its branch and ends its branch with `complete(branchOutput)` — then `join` once, with
 * input `{ outputs: [branch0Output, branch1Output, …] }` in branch order, after the last branch
 * succeeded. 1 to `MAX_FAN_OUT_BRANCHES` branches; a branch cannot fan out again.
 *
 * @example return fanOut(urls.map((url) => branch('fetchPage', { url })), 'summarize');
 */
export function fanOut<R = StepResult, const J extends JoinIn<FanOutIn<R>> = JoinIn<FanOutIn<R>>>(
  branches: ReadonlyArray<BranchIn<FanOutIn<R>>>,
  join: J,
  ...output: OutputParam<OutputOf<FanOutIn<R>>>
): FanOutIn<R> {
  return { type: 'fanOut', branches, join, output: output[0] } as unknown as FanOutIn<R>;
}

/**
 * One branch of a {@link fanOut}: `branch('parse', { document })` checks the step name and its
 * input like `next` does (a plain `{ step, input }` object works too).
 */
export function branch<C = Branch, const S extends BranchStepIn<C> = BranchStepIn<C>>(
  step: S,
  input: InputOf<BranchFor<C, S>>,
): BranchFor<C, S> {
  return { step, input } as unknown as BranchFor<C, S>;
}

/**
 * The task succeeded with `output` — or, in a fan-out branch, the branch did.
 *
 * Where no output type is expected (no context, an undeclared output, or a handler that takes no
 * `ctx` and is therefore typed after the fact) `O` is the argument's own type.
 */
export function complete<R = StepResult, O = undefined>(
  ...output: CompleteParam<R, O>
): CompleteFor<R, O> {
  return { type: 'complete', output: output[0] } as unknown as CompleteFor<R, O>;
}

type LooseOutput<R> = unknown extends OutputOf<CompleteIn<R>> ? true : false;
type CompleteParam<R, O> =
  LooseOutput<R> extends true ? [output?: O] : OutputParam<OutputOf<CompleteIn<R>>>;
type CompleteFor<R, O> = LooseOutput<R> extends true ? CompleteResult<O> : CompleteIn<R>;

/**
 * Stop the task until a person approves or rejects (`ApproveTask`, `sluice approve`). Approved, the
 * `then` continuation runs and its steps see the decision in `ctx.approval`; rejected, the task is
 * cancelled. With nobody deciding within `timeoutMs`, the task is paused or cancelled, as
 * `onTimeout` says; a paused task that is resumed waits for the approval again.
 *
 * @example
 * return awaitApproval({
 *   prompt: `Publish this outline?\n${outline}`,
 *   timeoutMs: 24 * 60 * 60 * 1000,
 *   onTimeout: 'pause',
 *   then: next('publish', { outline }),
 *   output: { outline },
 * });
 */
export function awaitApproval<R = StepResult>(request: ApprovalRequest<R>): ApprovalIn<R> {
  const { prompt, timeoutMs, onTimeout, then } = request;
  const output = (request as { readonly output?: unknown }).output;
  return {
    type: 'awaitApproval',
    prompt,
    timeoutMs,
    onTimeout,
    then,
    output,
  } as unknown as ApprovalIn<R>;
}

/**
 * What a finished step asks for next, as recorded in Postgres by the executor and turned into the
 * next transition by the scheduler.
 */
import type { ErrorClass, SerializedStepError } from './errors.js';
import type { ApprovalTimeoutAction } from './task-state.js';

/** A JSON value (inputs and outputs of steps are stored as JSON). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** One step to run, with its input. */
export interface StepCall {
  readonly step: string;
  readonly input: Json;
}

/**
 * What follows a step (directly, or after an approval): one more step, or several in parallel
 * whose outputs are joined by one step once the last of them succeeded.
 */
export type Continuation =
  | { readonly type: 'next'; readonly step: string; readonly input: Json }
  | { readonly type: 'fanOut'; readonly branches: readonly StepCall[]; readonly join: string };

/** Most branches one fan-out may start. */
export const MAX_FAN_OUT_BRANCHES = 1_000;

/** Longest approval a step may ask for (30 days). */
export const MAX_APPROVAL_TIMEOUT_MS = 30 * 24 * 60 * 60 * 1_000;

/** The outcome of one step attempt. `output` is the step's own result, kept on its row. */
export type StepOutcome =
  | ({ readonly output: Json } & Continuation)
  | { readonly type: 'complete'; readonly output: Json }
  | {
      readonly type: 'awaitApproval';
      readonly output: Json;
      /** What the person is asked. */
      readonly prompt: string;
      readonly timeoutMs: number;
      readonly onTimeout: ApprovalTimeoutAction;
      /** What runs once approved. */
      readonly then: Continuation;
    }
  | {
      readonly type: 'failed';
      readonly error: SerializedStepError;
      /**
       * For a `schema_validation` failure of a handler's result: what the handler returned (as
       * JSON), so the step's repair step can fix it.
       */
      readonly result?: Json;
    }
  /** The step stopped because its task was cancelled. */
  | { readonly type: 'cancelled' };

export type StepOutcomeType = StepOutcome['type'];

/** A failed outcome of a given class (message kept for people). */
export function failedOutcome(
  errorClass: ErrorClass,
  message: string,
  retryable: boolean,
): StepOutcome {
  return { type: 'failed', error: { errorClass, message, retryable } };
}

/** The continuation an outcome asks for right away (`next` or `fanOut`), if any. */
export function continuationOf(outcome: StepOutcome): Continuation | undefined {
  switch (outcome.type) {
    case 'next':
      return { type: 'next', step: outcome.step, input: outcome.input };
    case 'fanOut':
      return { type: 'fanOut', branches: outcome.branches, join: outcome.join };
    default:
      return undefined;
  }
}

/** The names of the steps a continuation starts (the join is started later). */
export function stepsStartedBy(continuation: Continuation): string[] {
  return continuation.type === 'next'
    ? [continuation.step]
    : continuation.branches.map((branch) => branch.step);
}

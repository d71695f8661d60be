/**
 * What a finished step asks for next, as recorded in Postgres by the executor and turned into the
 * next transition by the scheduler.
 */
import type { SerializedStepError, ErrorClass } from './errors.js';

/** A JSON value (inputs and outputs of steps are stored as JSON). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The outcome of one step attempt. */
export type StepOutcome =
  | { readonly type: 'next'; readonly output: Json; readonly step: string; readonly input: Json }
  | { readonly type: 'complete'; readonly output: Json }
  | { readonly type: 'failed'; readonly error: SerializedStepError }
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

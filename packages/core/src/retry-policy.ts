/**
 * Whether and when a failed step runs again: one pure function over the error (its class, whether
 * it is retryable at all, the delay the dependency asked for), the attempts made and the step's
 * limit. Backoff is exponential with full jitter (a uniformly random delay up to the exponential
 * cap), so retries of many tasks spread out instead of arriving together.
 */
import { assertNever, type ErrorClass, type SerializedStepError } from './errors.js';

/** How a class of errors is retried. Durations in milliseconds. */
export interface RetryBackoff {
  /** The cap of the first retry's delay; doubled for every further attempt. */
  readonly baseDelayMs: number;
  /** The largest delay, whatever the attempt. */
  readonly maxDelayMs: number;
}

/** Never wait longer than this for a dependency's `Retry-After` (a broken header must not park a task for days). */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1_000;

/**
 * The backoff of each class (ARCHITECTURE.md, errors and retries), or `undefined` for the classes
 * that are never retried.
 */
export function backoffOf(errorClass: ErrorClass): RetryBackoff | undefined {
  switch (errorClass) {
    case 'llm_rate_limit':
      // Rate limits clear on the provider's schedule: longer waits, honouring Retry-After.
      return { baseDelayMs: 2_000, maxDelayMs: 120_000 };
    case 'external_5xx':
      return { baseDelayMs: 1_000, maxDelayMs: 60_000 };
    case 'tool_timeout':
    case 'unknown':
      return { baseDelayMs: 1_000, maxDelayMs: 30_000 };
    case 'schema_validation':
    case 'permission_denied':
    case 'approval_timeout':
    case 'cancelled':
      return undefined;
    default:
      return assertNever(errorClass);
  }
}

/** What {@link decideRetry} answers. */
export type RetryDecision =
  | { readonly retry: true; readonly delayMs: number }
  | { readonly retry: false; readonly reason: 'not_retryable' | 'attempts_exhausted' };

/** What {@link decideRetry} looks at. */
export interface RetryQuestion {
  readonly error: SerializedStepError;
  /** Attempts of this step made so far, the failed one included (1 after the first). */
  readonly attempts: number;
  /** The step's limit of attempts (its declared or default `maxAttempts`). */
  readonly maxAttempts: number;
  /** A random number in [0, 1), for the jitter (Math.random in production, fixed in tests). */
  readonly random: number;
  /**
   * The step's own backoff, replacing its class's for the fields given (a task type that knows its
   * dependency recovers fast, or a test). It never makes a class retryable that is not.
   */
  readonly backoff?: Partial<RetryBackoff>;
}

/** Decides whether a failed step runs again, and after how long. */
export function decideRetry(question: RetryQuestion): RetryDecision {
  const classBackoff = backoffOf(question.error.errorClass);
  if (!classBackoff || !question.error.retryable) return { retry: false, reason: 'not_retryable' };
  if (question.attempts >= question.maxAttempts)
    return { retry: false, reason: 'attempts_exhausted' };
  const backoff = { ...classBackoff, ...question.backoff };
  const exponent = Math.max(0, question.attempts - 1);
  const cap = Math.min(backoff.maxDelayMs, backoff.baseDelayMs * 2 ** exponent);
  const jittered = Math.floor(Math.min(Math.max(question.random, 0), 1) * cap);
  const asked = Math.min(question.error.retryAfterMs ?? 0, MAX_RETRY_AFTER_MS);
  return { retry: true, delayMs: Math.max(jittered, asked) };
}

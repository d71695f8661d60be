/**
 * Turns whatever a step handler threw into a stored step error with its class. The full retry
 * policy per class is the scheduler's; here we only name what happened.
 */
import {
  isRetryableClass,
  storableText,
  type ErrorClass,
  type SerializedStepError,
} from '@sluice/core';

/** Why a step's abort signal fired. */
export type AbortReason = 'cancelled' | 'timeout';

/**
 * Classifies `error`. `aborted` says whether (and why) the step's signal fired: an error thrown
 * after a cancel is a cancellation, after the timeout a timeout, whatever its own type.
 */
export function classifyStepError(
  error: unknown,
  aborted: AbortReason | undefined,
): SerializedStepError {
  const message = error instanceof Error ? error.message : String(error);
  const errorClass = classOf(error, aborted);
  const retryAfterMs = numberField(error, 'retryAfterMs');
  return {
    errorClass,
    message: storableText(message.slice(0, 2_000)),
    retryable: isRetryableClass(errorClass) && !isFinalClientError(error),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  };
}

/**
 * An HTTP answer that asking again will not change (400, 404, 422 …): the request itself is wrong.
 * 408 (timeout), 409 (conflict), 425 (too early) and 429 (rate limit) may pass on a later try.
 */
function isFinalClientError(error: unknown): boolean {
  const status = numberField(error, 'status');
  if (!(error instanceof Error) || error.name !== 'HttpStatusError' || status === undefined) {
    return false;
  }
  return status >= 400 && status < 500 && ![408, 409, 425, 429].includes(status);
}

function classOf(error: unknown, aborted: AbortReason | undefined): ErrorClass {
  if (aborted === 'cancelled') return 'cancelled';
  if (aborted === 'timeout') return 'tool_timeout';
  const name = error instanceof Error ? error.name : undefined;
  const status = numberField(error, 'status');
  if (name === 'HttpStatusError' && status !== undefined) {
    if (status === 429) return 'llm_rate_limit';
    if (status === 408) return 'tool_timeout';
    if (status === 401 || status === 403) return 'permission_denied';
    if (status >= 500) return 'external_5xx';
    return 'unknown';
  }
  if (name === 'ZodError') return 'schema_validation';
  if (name === 'TimeoutError') return 'tool_timeout';
  return 'unknown';
}

function numberField(error: unknown, field: string): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const value = (error as Record<string, unknown>)[field];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

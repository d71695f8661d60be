/**
 * Errors step handlers throw (or let escape) that the executor classifies into error classes.
 * Classification looks at `name` and fields, never `instanceof`, so errors from another copy of
 * this package classify the same.
 */

/** A non-2xx answer of an HTTP call: classified by its status (429, 5xx, 401/403 …). */
export class HttpStatusError extends Error {
  override readonly name = 'HttpStatusError';
  /** The delay the server asked for with `Retry-After`, in milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(
    readonly status: number,
    message: string,
    retryAfterMs?: number,
  ) {
    super(message);
    this.retryAfterMs = retryAfterMs;
  }

  /**
   * Builds the error from a response. The delay is `retry-after-ms` when usable (OpenAI-style
   * providers send it, often alone, and their SDKs read it first), else `Retry-After` in seconds
   * or as an HTTP date.
   */
  static fromResponse(response: Response, what: string): HttpStatusError {
    return new HttpStatusError(
      response.status,
      `${what} answered HTTP ${response.status}`,
      parseRetryAfterMs(response.headers.get('retry-after-ms')) ??
        parseRetryAfter(response.headers.get('retry-after')),
    );
  }
}

/** `retry-after-ms` (not standard; OpenAI-style APIs) in milliseconds; undefined when unusable. */
function parseRetryAfterMs(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const ms = Number(value);
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

/** `Retry-After` in milliseconds, from delta-seconds or an HTTP date; undefined when absent. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1_000 : undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

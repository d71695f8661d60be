/**
 * Request and token budgets of the `llm` resource (BACKPRESSURE-REFERENCES.md, LLM provider
 * limits): providers limit requests and tokens per minute, refilled continuously. A call is
 * admitted only when both buckets cover its cost — charged up front with the step's declared or
 * estimated tokens — and corrected once the provider reports the usage. Rate-limit headers are
 * the provider's own count (it sees every client of the key, we see ours): `x-ratelimit-remaining-*`
 * set the buckets to what it says is left, `retry-after` pauses both.
 *
 * A bucket may go below zero (a correction larger than the charge, a call bigger than the
 * bucket): the debt is repaid by the refill before anything else is admitted. A call costing more
 * than a whole bucket is admitted when the bucket is full, otherwise it would wait forever.
 *
 * Pure and serialisable: the caller keeps the state (one per provider key) and passes time in.
 */

/** One bucket: `capacity` units, refilled at `perMinute` per minute. */
export interface Bucket {
  readonly capacity: number;
  readonly perMinute: number;
  /** Units left at `atMs` (may be negative: a debt). */
  readonly level: number;
  readonly atMs: number;
}

/** The budgets of one provider key. */
export interface LlmBudget {
  readonly requests: Bucket;
  readonly tokens: Bucket;
  /** Nothing is admitted before this time (`retry-after`, an exhausted limit until its reset). */
  readonly pausedUntilMs: number;
}

/** What a call costs. */
export interface LlmCost {
  /** Declared or estimated tokens: prompt plus `max_tokens`, as the provider counts them. */
  readonly tokens: number;
  /** Requests, 1 unless a batch. */
  readonly requests?: number;
}

export type TakeDecision =
  | { readonly admitted: true; readonly budget: LlmBudget }
  | { readonly admitted: false; readonly waitMs: number; readonly budget: LlmBudget };

/** The provider's rate-limit headers of one response, already parsed to numbers. */
export interface RateLimitHeaders {
  /** `x-ratelimit-remaining-requests`. */
  readonly remainingRequests?: number;
  /** `x-ratelimit-remaining-tokens`. */
  readonly remainingTokens?: number;
  /** `x-ratelimit-reset-*` of a limit that is exhausted: how long until it admits again. */
  readonly resetMs?: number;
  /** `retry-after` (or `retry-after-ms`) of a 429. */
  readonly retryAfterMs?: number;
}

/** Full buckets of one minute's worth each, starting at `nowMs`. */
export function newLlmBudget(
  limits: { readonly requestsPerMinute: number; readonly tokensPerMinute: number },
  nowMs: number,
): LlmBudget {
  return {
    requests: fullBucket(limits.requestsPerMinute, nowMs),
    tokens: fullBucket(limits.tokensPerMinute, nowMs),
    pausedUntilMs: nowMs,
  };
}

function fullBucket(perMinute: number, nowMs: number): Bucket {
  return { capacity: perMinute, perMinute, level: perMinute, atMs: nowMs };
}

/** The bucket refilled up to `nowMs` (time going backwards refills nothing). */
export function refill(bucket: Bucket, nowMs: number): Bucket {
  if (nowMs <= bucket.atMs) return bucket;
  const added = ((nowMs - bucket.atMs) * bucket.perMinute) / 60_000;
  return { ...bucket, level: Math.min(bucket.capacity, bucket.level + added), atMs: nowMs };
}

/** Milliseconds until a refilled bucket covers `cost` (0: it does now). */
function msUntilCovers(bucket: Bucket, cost: number): number {
  const needed = Math.min(cost, bucket.capacity) - bucket.level;
  if (needed <= 0) return 0;
  if (bucket.perMinute <= 0) return Number.POSITIVE_INFINITY;
  return Math.ceil((needed * 60_000) / bucket.perMinute);
}

/** Admits a call and charges both buckets, or says how long to wait (charging nothing). */
export function take(budget: LlmBudget, cost: LlmCost, nowMs: number): TakeDecision {
  const requestCost = cost.requests ?? 1;
  const refilled: LlmBudget = {
    ...budget,
    requests: refill(budget.requests, nowMs),
    tokens: refill(budget.tokens, nowMs),
  };
  const waitMs = Math.max(
    refilled.pausedUntilMs - nowMs,
    msUntilCovers(refilled.requests, requestCost),
    msUntilCovers(refilled.tokens, cost.tokens),
  );
  if (waitMs > 0) return { admitted: false, waitMs, budget: refilled };
  return {
    admitted: true,
    budget: {
      ...refilled,
      requests: { ...refilled.requests, level: refilled.requests.level - requestCost },
      tokens: { ...refilled.tokens, level: refilled.tokens.level - cost.tokens },
    },
  };
}

/**
 * Charges the difference between the tokens charged up front and those the provider reports: a
 * call that used fewer gives the rest back (never above capacity), one that used more adds debt.
 */
export function correct(
  budget: LlmBudget,
  declaredTokens: number,
  actualTokens: number,
): LlmBudget {
  const tokens = budget.tokens;
  const level = Math.min(tokens.capacity, tokens.level + declaredTokens - actualTokens);
  return { ...budget, tokens: { ...tokens, level } };
}

/**
 * Brings the budget in line with the provider's headers: a remaining count replaces ours (lower:
 * other clients of the key spent it; higher: our estimates were too high), a `retry-after`
 * pauses admission, and an exhausted limit pauses until its reset.
 */
export function applyRateLimitHeaders(
  budget: LlmBudget,
  headers: RateLimitHeaders,
  nowMs: number,
): LlmBudget {
  let requests = refill(budget.requests, nowMs);
  let tokens = refill(budget.tokens, nowMs);
  let pausedUntilMs = budget.pausedUntilMs;
  if (isCount(headers.remainingRequests))
    requests = { ...requests, level: Math.min(requests.capacity, headers.remainingRequests) };
  if (isCount(headers.remainingTokens))
    tokens = { ...tokens, level: Math.min(tokens.capacity, headers.remainingTokens) };
  const exhausted = headers.remainingRequests === 0 || headers.remainingTokens === 0;
  if (exhausted && isCount(headers.resetMs))
    pausedUntilMs = Math.max(pausedUntilMs, nowMs + headers.resetMs);
  if (isCount(headers.retryAfterMs))
    pausedUntilMs = Math.max(pausedUntilMs, nowMs + headers.retryAfterMs);
  return { requests, tokens, pausedUntilMs };
}

function isCount(value: number | undefined): value is number {
  return value !== undefined && Number.isFinite(value) && value >= 0;
}

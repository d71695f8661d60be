/**
 * Adaptive concurrency limit for a rate-limited resource (the `llm` resource first), after
 * Netflix's `AIMDLimit`: additive increase while calls succeed, multiplicative decrease on a drop.
 * The provider's real limit is unknown and changes; the limit finds it by itself instead of
 * hammering it (BACKPRESSURE-REFERENCES.md, adaptive concurrency limits).
 *
 * - Increase: +1 after `limit` successes (about +1 per round trip at full use), and only while at
 *   least half the limit is in use — an idle resource proves nothing about a higher limit.
 * - Decrease: ×`backoffRatio` on a 429 or a timeout, or after `latencyStrikes` consecutive samples
 *   slower than `latencyTolerance` × the baseline (one slow answer is an outlier, not a trend).
 *   At most one decrease per `decreaseIntervalMs`: the 429s of one burst are one signal, not many.
 *   Successes within that interval after any drop do not count towards an increase either: they
 *   were admitted at the limit that just failed.
 * - The baseline is the lowest latency seen, drifting up by `baselineDrift` of the gap per sample
 *   so a provider that got slower for good is re-learnt instead of shrinking the limit forever.
 *   LLM latency grows with output length: pass a latency that does not (time to first token, or
 *   per output token), or set `latencyTolerance` to `Infinity` to use 429s and timeouts only.
 *
 * Pure and serialisable: the caller keeps the state and passes time in.
 */

/** How the limit adapts. */
export interface AdaptiveLimitConfig {
  readonly minLimit: number;
  readonly maxLimit: number;
  readonly initialLimit: number;
  /** β of the multiplicative decrease, in (0, 1). */
  readonly backoffRatio: number;
  /** A sample slower than this × the baseline counts as a latency strike (> 1; Infinity: off). */
  readonly latencyTolerance: number;
  /** Consecutive strikes that make a drop. */
  readonly latencyStrikes: number;
  /** Share of the gap to a slower sample the baseline moves by, in [0, 1). */
  readonly baselineDrift: number;
  /** Shortest time between two decreases. */
  readonly decreaseIntervalMs: number;
}

/** Defaults for an LLM provider: β 0.9 as Netflix, one decrease per second. */
export const DEFAULT_ADAPTIVE_LIMIT: AdaptiveLimitConfig = {
  minLimit: 1,
  maxLimit: 200,
  initialLimit: 4,
  backoffRatio: 0.9,
  latencyTolerance: 2,
  latencyStrikes: 3,
  baselineDrift: 0.01,
  decreaseIntervalMs: 1_000,
};

/** The state the caller keeps (JSON-safe). */
export interface AdaptiveLimitState {
  /** The limit, fractional so small decreases add up; use {@link concurrencyOf} to apply it. */
  readonly limit: number;
  /** Successes counted towards the next increase. */
  readonly successes: number;
  /** Consecutive slow samples. */
  readonly slowStreak: number;
  /** Lowest latency seen (drifting up slowly), `null` before the first timed sample. */
  readonly baselineMs: number | null;
  /** When the last decrease happened, `null` if never. */
  readonly lastDecreaseAtMs: number | null;
  /** When the last drop (decreasing or not) was seen, `null` if never. */
  readonly lastDropAtMs: number | null;
}

/** One finished call. */
export interface AdaptiveLimitSample {
  readonly atMs: number;
  /** `error`: a failure that says nothing about load (bad request, tool error) — ignored. */
  readonly outcome: 'ok' | 'rate_limited' | 'timeout' | 'error';
  /** The call's latency (see the module comment for LLMs); absent: not timed. */
  readonly latencyMs?: number;
  /** Calls in flight when this one started, itself included. */
  readonly inFlight: number;
}

export function initialAdaptiveLimit(config: AdaptiveLimitConfig): AdaptiveLimitState {
  return {
    limit: clamp(config.initialLimit, config.minLimit, config.maxLimit),
    successes: 0,
    slowStreak: 0,
    baselineMs: null,
    lastDecreaseAtMs: null,
    lastDropAtMs: null,
  };
}

/** The whole number of calls the limit allows at once (never below `minLimit`). */
export function concurrencyOf(state: AdaptiveLimitState, config: AdaptiveLimitConfig): number {
  return Math.max(config.minLimit, Math.floor(state.limit));
}

/** The state after one finished call. */
export function observe(
  state: AdaptiveLimitState,
  sample: AdaptiveLimitSample,
  config: AdaptiveLimitConfig,
): AdaptiveLimitState {
  if (sample.outcome === 'error') return state;
  if (sample.outcome === 'rate_limited' || sample.outcome === 'timeout') {
    return decrease({ ...state, slowStreak: 0 }, sample, config);
  }
  const latency = sample.latencyMs;
  let baselineMs = state.baselineMs;
  let slowStreak = 0;
  if (latency !== undefined && Number.isFinite(latency) && latency >= 0) {
    const slow = baselineMs !== null && latency > baselineMs * config.latencyTolerance;
    slowStreak = slow ? state.slowStreak + 1 : 0;
    baselineMs =
      baselineMs === null || latency <= baselineMs
        ? latency
        : baselineMs + (latency - baselineMs) * config.baselineDrift;
  }
  if (slowStreak >= config.latencyStrikes) {
    return decrease({ ...state, baselineMs, slowStreak: 0 }, sample, config);
  }
  const next: AdaptiveLimitState = { ...state, baselineMs, slowStreak };
  // An app-limited resource (under half used) gives no evidence that more would succeed.
  if (sample.inFlight * 2 < Math.floor(state.limit)) return next;
  if (state.lastDropAtMs !== null && sample.atMs - state.lastDropAtMs < config.decreaseIntervalMs)
    return next;
  const successes = state.successes + 1;
  if (successes < Math.floor(state.limit)) return { ...next, successes };
  return { ...next, successes: 0, limit: Math.min(config.maxLimit, state.limit + 1) };
}

/**
 * Decreases from what was in flight when the dropped call started, not from the limit: the limit
 * may have grown meanwhile, and what failed is that concurrency (TCP likewise halves the flight
 * size, RFC 5681). Without this a limit just raised by one barely comes down at small limits.
 */
function decrease(
  state: AdaptiveLimitState,
  sample: AdaptiveLimitSample,
  config: AdaptiveLimitConfig,
): AdaptiveLimitState {
  const atMs = sample.atMs;
  const base = Math.min(state.limit, Math.max(sample.inFlight, config.minLimit));
  if (state.lastDecreaseAtMs !== null && atMs - state.lastDecreaseAtMs < config.decreaseIntervalMs)
    return { ...state, successes: 0, lastDropAtMs: atMs };
  return {
    ...state,
    lastDropAtMs: atMs,
    limit: Math.max(config.minLimit, base * config.backoffRatio),
    successes: 0,
    lastDecreaseAtMs: atMs,
  };
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}

/** A problem of a configuration, or `undefined` when it is usable. */
export function adaptiveLimitProblem(config: AdaptiveLimitConfig): string | undefined {
  if (!(Number.isInteger(config.minLimit) && config.minLimit >= 1))
    return 'minLimit must be a positive integer';
  if (!(Number.isInteger(config.maxLimit) && config.maxLimit >= config.minLimit))
    return 'maxLimit must be an integer of at least minLimit';
  if (!(Number.isFinite(config.initialLimit) && config.initialLimit > 0))
    return 'initialLimit must be positive';
  if (!(config.backoffRatio > 0 && config.backoffRatio < 1))
    return 'backoffRatio must be between 0 and 1';
  if (!(config.latencyTolerance > 1)) return 'latencyTolerance must be above 1 (or Infinity)';
  if (!(Number.isInteger(config.latencyStrikes) && config.latencyStrikes >= 1))
    return 'latencyStrikes must be a positive integer';
  if (!(config.baselineDrift >= 0 && config.baselineDrift < 1))
    return 'baselineDrift must be in [0, 1)';
  if (!(Number.isFinite(config.decreaseIntervalMs) && config.decreaseIntervalMs >= 0))
    return 'decreaseIntervalMs must be 0 or more';
  return undefined;
}

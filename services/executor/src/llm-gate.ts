/**
 * The executor's gate in front of the LLM provider: one per process, shared by the LLM client of
 * every step, so the process as a whole finds the provider's limit instead of each step hammering
 * it on its own (BACKPRESSURE-REFERENCES.md, adaptive concurrency limits and LLM provider limits).
 *
 * A call passes when both hold:
 * - a concurrency permit is free under an AIMD limit (core `observeAdaptiveLimit`). Loss-based
 *   first: a 429 (or a 503/529 overload) or a call cut by its step's timeout is a drop, a failed or
 *   cancelled call none. LLM latency grows with output length, so by default it is only measured
 *   for reporting; with `latencyTolerance` set, {@link LATENCY_STRIKES} successes in a row slower
 *   than that many times the baseline are a drop too.
 * - the request and token buckets (core `takeLlmBudget`) cover the call's estimated cost, when
 *   requests or tokens per minute are configured; the provider's `x-ratelimit-*` and
 *   `retry-after` headers correct them either way, so after a 429 with `retry-after` no call
 *   starts before that time (an hour at most, as a step's retry honours). A remaining count is
 *   taken less the calls granted after the one it came with and still out, which the provider
 *   had not counted.
 *
 * Waiters are served first come, first served: a large call at the head holds back smaller ones
 * behind it rather than starving. Nothing polls: one timer is set to the next refill or retry
 * time when the head of the queue waits for the buckets; a released permit wakes the queue
 * directly. A 429 is not retried here — the step fails as rate-limited and the scheduler retries
 * it by class.
 */
import {
  MAX_RETRY_AFTER_MS,
  applyRateLimitHeaders,
  concurrencyOf,
  correctLlmBudget,
  initialAdaptiveLimit,
  newLlmBudget,
  observeAdaptiveLimit,
  takeLlmBudget,
  type AdaptiveLimitConfig,
  type AdaptiveLimitSample,
  type AdaptiveLimitState,
  type LlmBudget,
  type RateLimitHeaders,
} from '@sluice/core';

/** Shortest time between two decreases unless configured: the 429s of one burst are one signal. */
export const DEFAULT_LLM_DECREASE_INTERVAL_MS = 1_000;
/** How many recent call latencies the p95 of {@link LlmGateSnapshot} is taken over. */
export const LATENCY_WINDOW = 200;
/** The longest delay a timer holds (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;
/** Statuses that mean the provider pushes back (rate limit, overload): a drop for the AIMD limit. */
export const PUSHBACK_STATUSES: ReadonlySet<number> = new Set([429, 503, 529]);

/** How the gate limits calls (the executor maps its `SLUICE_LLM_*` variables to this). */
/** Slow successes in a row that make a drop (with {@link LlmGateOptions.latencyTolerance}). */
export const LATENCY_STRIKES = 3;
/** Share of the gap to a slower success the latency baseline moves by. */
const BASELINE_DRIFT = 0.01;

export interface LlmGateOptions {
  /** Bounds and start of the adaptive concurrency limit (whole calls). */
  readonly minConcurrency: number;
  readonly maxConcurrency: number;
  readonly initialConcurrency: number;
  /** Factor of the multiplicative decrease on a drop, in (0, 1); core's `backoffRatio`. */
  readonly backoffRatio: number;
  /** Shortest time between two decreases; default {@link DEFAULT_LLM_DECREASE_INTERVAL_MS}. */
  readonly decreaseIntervalMs?: number;
  /**
   * Rising latency as a drop: {@link LATENCY_STRIKES} successful calls in a row slower than this
   * many times the baseline (the fastest seen, drifting up slowly) decrease the limit like a 429.
   * Generous, because an LLM's latency follows the length of its answer; absent: latency is only
   * reported.
   */
  readonly latencyTolerance?: number;
  /** Requests per minute the provider allows; undefined: unlimited. */
  readonly requestsPerMinute?: number;
  /** Tokens (prompt + completion) per minute the provider allows; undefined: unlimited. */
  readonly tokensPerMinute?: number;
}

/** What a caller asks to pass. */
export interface LlmGateRequest {
  /** Prompt plus the completion allowance, as the provider counts them up front. */
  readonly estimatedTokens: number;
  /** Aborts the wait: `acquire` then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/** The headers the gate reads (a fetch `Headers` fits). */
export interface HeaderSource {
  get(name: string): string | null;
}

/** How a call that held a permit ended. */
export interface LlmCallResult {
  /**
   * The call succeeded: a 2xx answer that held a completion. A 2xx whose body was unusable is not
   * ok (a failed call, with its `status`).
   */
  readonly ok: boolean;
  /** The HTTP status, absent when no answer came (network error, abort). */
  readonly status?: number;
  readonly latencyMs: number;
  /** Tokens the provider reports the call used (prompt + completion); corrects the estimate. */
  readonly usageTokens?: number;
  /** The answer's headers: `x-ratelimit-*`, `retry-after(-ms)`. */
  readonly headers?: HeaderSource;
  /** The call was cut by a timeout (its step's) before its answer was whole: a drop, like a 429. */
  readonly timedOut?: boolean;
  /**
   * The call was cut by a cancel (of its step) before its answer was whole: says nothing about
   * the provider, so neither a success nor a failure nor a drop; counted in `cancelled`.
   */
  readonly cancelled?: boolean;
}

/** A call's right to run; give it back exactly once (further calls are ignored). */
export interface LlmPermit {
  release(result: LlmCallResult): void;
}

/**
 * Cumulative counters and current gauges, for the governor. Finished calls are counted once, in
 * exactly one of `succeeded`, `rateLimited` (429/503/529), `failed` (timeouts included) and
 * `cancelled`.
 */
export interface LlmGateSnapshot {
  /** Calls allowed at once now. */
  readonly limit: number;
  readonly inFlight: number;
  readonly waiting: number;
  /** Permits handed out. */
  readonly calls: number;
  readonly rateLimited: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly cancelled: number;
  /** p95 latency of the last {@link LATENCY_WINDOW} answered calls; null before any. */
  readonly latencyP95Ms: number | null;
}

export interface LlmGate {
  /** Waits (FIFO) for a concurrency permit and budget for `request`. */
  acquire(request: LlmGateRequest): Promise<LlmPermit>;
  snapshot(): LlmGateSnapshot;
  /** Rejects every waiter and any later `acquire`; permits out may still be released. */
  close(): void;
}

interface Waiter {
  readonly tokens: number;
  readonly resolve: (permit: LlmPermit) => void;
  readonly reject: (reason: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

/**
 * Creates the gate.
 *
 * @throws RangeError for options the adaptive limit or the buckets cannot use.
 */
export function createLlmGate(options: LlmGateOptions): LlmGate {
  const config: AdaptiveLimitConfig = {
    minLimit: options.minConcurrency,
    maxLimit: options.maxConcurrency,
    initialLimit: options.initialConcurrency,
    backoffRatio: options.backoffRatio,
    latencyTolerance: options.latencyTolerance ?? Number.POSITIVE_INFINITY,
    latencyStrikes: LATENCY_STRIKES,
    baselineDrift: BASELINE_DRIFT,
    decreaseIntervalMs: options.decreaseIntervalMs ?? DEFAULT_LLM_DECREASE_INTERVAL_MS,
  };
  const problem = limitOptionsProblem(options);
  if (problem) throw new RangeError(problem);

  // The gate's time: the wall clock's advance, never its steps back. The buckets refill by the
  // time since their last look, so read on a clock NTP set back they stopped refilling (and a
  // pause lasted longer) by as much, every LLM call of the process held until it caught up.
  let wallMs = Date.now();
  let gateMs = wallMs;
  const now = (): number => {
    const readMs = Date.now();
    gateMs += Math.max(0, readMs - wallMs);
    wallMs = readMs;
    return gateMs;
  };

  let limit: AdaptiveLimitState = initialAdaptiveLimit(config);
  // An unconfigured limit is an infinite bucket: always covers, yet the provider's headers still
  // pause it (an exhausted `remaining` with its reset, a `retry-after`).
  let budget: LlmBudget = newLlmBudget(
    {
      requestsPerMinute: options.requestsPerMinute ?? Number.POSITIVE_INFINITY,
      tokensPerMinute: options.tokensPerMinute ?? Number.POSITIVE_INFINITY,
    },
    now(),
  );
  const queue: Waiter[] = [];
  const latencies: number[] = [];
  let inFlight = 0;
  let calls = 0;
  let rateLimited = 0;
  let succeeded = 0;
  let failed = 0;
  let cancelled = 0;
  let closed = false;
  let timer: { handle: ReturnType<typeof setTimeout>; atMs: number } | undefined;

  // Tokens charged to each permit out, by the order they were granted in.
  const outstanding = new Map<number, number>();
  let granted = 0;

  const grant = (tokens: number): LlmPermit => {
    inFlight += 1;
    calls += 1;
    const startedInFlight = inFlight;
    const order = (granted += 1);
    outstanding.set(order, tokens);
    let released = false;
    return {
      release(result) {
        if (released) return;
        released = true;
        inFlight -= 1;
        outstanding.delete(order);
        settle(tokens, startedInFlight, order, result);
        pump();
      },
    };
  };

  /**
   * The provider's remaining counts of a call's answer less the calls granted after that call and
   * still out: the provider counted what it had seen when it took that call, not those, and set
   * to its count as is the buckets admitted them a second time (calls granted before it were seen
   * first, so they are not subtracted).
   */
  const uncountedBy = (headers: RateLimitHeaders, order: number): RateLimitHeaders => {
    let requests = 0;
    let tokens = 0;
    for (const [later, charged] of outstanding) {
      if (later <= order) continue;
      requests += 1;
      tokens += charged;
    }
    const { remainingRequests, remainingTokens } = headers;
    return {
      ...headers,
      ...(remainingRequests === undefined
        ? {}
        : { remainingRequests: Math.max(0, remainingRequests - requests) }),
      ...(remainingTokens === undefined
        ? {}
        : { remainingTokens: Math.max(0, remainingTokens - tokens) }),
    };
  };

  const settle = (
    tokens: number,
    startedInFlight: number,
    order: number,
    result: LlmCallResult,
  ): void => {
    const nowMs = now();
    const pushback = result.status !== undefined && PUSHBACK_STATUSES.has(result.status);
    if (result.ok) succeeded += 1;
    else if (pushback) rateLimited += 1;
    else if (result.cancelled === true) cancelled += 1;
    else failed += 1;
    if (result.status !== undefined && Number.isFinite(result.latencyMs)) {
      latencies.push(result.latencyMs);
      if (latencies.length > LATENCY_WINDOW) latencies.shift();
    }
    const outcome: AdaptiveLimitSample['outcome'] = result.ok
      ? 'ok'
      : pushback
        ? 'rate_limited'
        : result.timedOut === true
          ? 'timeout'
          : 'error'; // a cancel included: it says nothing about load
    limit = observeAdaptiveLimit(
      limit,
      { atMs: nowMs, outcome, latencyMs: result.latencyMs, inFlight: startedInFlight },
      config,
    );
    // Charged up front: a call the provider never counted gives its tokens back, the others are
    // corrected to what they used (a refusal, 429 or other, costs nothing; an unanswered call or
    // a 2xx whose body was unusable, what we charged).
    const refused = result.status !== undefined && (result.status < 200 || result.status > 299);
    const usedTokens = result.usageTokens ?? (refused ? 0 : undefined);
    if (usedTokens !== undefined) budget = correctLlmBudget(budget, tokens, usedTokens);
    if (result.headers) {
      // Read on the wall clock: a retry-after may be an HTTP date.
      const headers = uncountedBy(readHeaders(result.headers), order);
      budget = applyRateLimitHeaders(budget, headers, nowMs);
    }
  };

  /** Admits waiters from the head while permits and budget allow; else arms the one timer. */
  const pump = (): void => {
    while (!closed && queue.length > 0) {
      if (inFlight >= concurrencyOf(limit, config)) return; // a release pumps again
      const head = queue[0];
      if (head === undefined) return;
      const nowMs = now();
      const decision = takeLlmBudget(budget, { tokens: head.tokens }, nowMs);
      budget = decision.budget;
      if (!decision.admitted) {
        arm(nowMs + decision.waitMs);
        return;
      }
      queue.shift();
      head.signal?.removeEventListener('abort', head.onAbort);
      head.resolve(grant(head.tokens));
    }
    // Nobody left to wake: a pending refill timer would only keep the process busy.
    if (queue.length === 0 && timer !== undefined) {
      clearTimeout(timer.handle);
      timer = undefined;
    }
  };

  const arm = (atMs: number): void => {
    if (!Number.isFinite(atMs)) return; // a zero refill rate: only headers or close() can help
    if (timer !== undefined && timer.atMs <= atMs) return;
    if (timer !== undefined) clearTimeout(timer.handle);
    // A longer delay than a timer holds (a retry-after of weeks) fires at once in Node, and the
    // pump would arm it again every millisecond: wake at the longest delay and look again.
    const handle = setTimeout(
      () => {
        timer = undefined;
        pump();
      },
      Math.min(MAX_TIMER_DELAY_MS, Math.max(0, atMs - now())),
    );
    timer = { handle, atMs };
  };

  return {
    acquire(request) {
      const { signal } = request;
      if (closed) return Promise.reject(new Error('the LLM gate is closed'));
      if (signal?.aborted) return Promise.reject(signal.reason as Error);
      const estimate = request.estimatedTokens;
      const tokens = Number.isFinite(estimate) ? Math.max(0, Math.ceil(estimate)) : 0;
      return new Promise<LlmPermit>((resolve, reject) => {
        const waiter: Waiter = {
          tokens,
          resolve,
          reject,
          signal,
          onAbort: () => {
            const index = queue.indexOf(waiter);
            if (index < 0) return;
            queue.splice(index, 1);
            reject(signal?.reason as Error);
            // The head left: the next one may fit now (or nobody waits and the timer goes).
            if (index === 0) pump();
          },
        };
        queue.push(waiter);
        signal?.addEventListener('abort', waiter.onAbort, { once: true });
        pump();
      });
    },
    snapshot() {
      return {
        limit: concurrencyOf(limit, config),
        inFlight,
        waiting: queue.length,
        calls,
        rateLimited,
        succeeded,
        failed,
        cancelled,
        latencyP95Ms: percentile(latencies, 0.95),
      };
    },
    close() {
      if (closed) return;
      closed = true;
      if (timer !== undefined) clearTimeout(timer.handle);
      timer = undefined;
      const error = new Error('the LLM gate is closed');
      for (const waiter of queue.splice(0)) {
        waiter.signal?.removeEventListener('abort', waiter.onAbort);
        waiter.reject(error);
      }
    },
  };
}

function limitOptionsProblem(options: LlmGateOptions): string | undefined {
  const { minConcurrency: min, maxConcurrency: max, initialConcurrency: initial } = options;
  if (!(Number.isInteger(min) && min >= 1)) return 'minConcurrency must be a positive integer';
  if (!(Number.isInteger(max) && max >= min))
    return 'maxConcurrency must be an integer of at least minConcurrency';
  if (!(Number.isFinite(initial) && initial >= min && initial <= max))
    return 'initialConcurrency must be between minConcurrency and maxConcurrency';
  if (!(options.backoffRatio > 0 && options.backoffRatio < 1))
    return 'backoffRatio must be between 0 and 1';
  const tolerance = options.latencyTolerance;
  if (tolerance !== undefined && !(tolerance > 1))
    return 'latencyTolerance must be above 1 (or absent: latency only reported)';
  const interval = options.decreaseIntervalMs;
  if (interval !== undefined && !(Number.isFinite(interval) && interval >= 0))
    return 'decreaseIntervalMs must be 0 or more';
  for (const [name, value] of [
    ['requestsPerMinute', options.requestsPerMinute],
    ['tokensPerMinute', options.tokensPerMinute],
  ] as const) {
    if (value !== undefined && !(Number.isFinite(value) && value > 0))
      return `${name} must be positive (or unset: unlimited)`;
  }
  return undefined;
}

/** The rate-limit headers of an OpenAI-compatible answer, as core's buckets take them. */
export function readHeaders(headers: HeaderSource, nowMs = Date.now()): RateLimitHeaders {
  const remainingRequests = count(headers.get('x-ratelimit-remaining-requests'));
  const remainingTokens = count(headers.get('x-ratelimit-remaining-tokens'));
  // Core pauses until the reset of an exhausted limit: the later of the exhausted ones.
  const resets = [
    remainingRequests === 0 ? duration(headers.get('x-ratelimit-reset-requests')) : undefined,
    remainingTokens === 0 ? duration(headers.get('x-ratelimit-reset-tokens')) : undefined,
  ].filter((ms): ms is number => ms !== undefined);
  const retryAfterMs =
    count(headers.get('retry-after-ms')) ?? retryAfter(headers.get('retry-after'), nowMs);
  // A pause is held to what a step's retry honours (an hour): a provider's broken header of days
  // would otherwise stop every LLM call of the executor for that long; after an hour the next
  // answer says again.
  const held = (ms: number) => Math.min(ms, MAX_RETRY_AFTER_MS);
  return {
    ...(remainingRequests === undefined ? {} : { remainingRequests }),
    ...(remainingTokens === undefined ? {} : { remainingTokens }),
    ...(resets.length === 0 ? {} : { resetMs: held(Math.max(...resets)) }),
    ...(retryAfterMs === undefined ? {} : { retryAfterMs: held(retryAfterMs) }),
  };
}

function count(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const number = Number(value);
  return Number.isFinite(number) && number >= 0 ? number : undefined;
}

/** `retry-after` in ms: delta-seconds or an HTTP date. */
function retryAfter(value: string | null, nowMs: number): number | undefined {
  const seconds = count(value);
  if (seconds !== undefined) return seconds * 1_000;
  if (value === null) return undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

const UNIT_MS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

/** OpenAI's reset durations (`1s`, `6m0s`, `20ms`, `1h2m3.5s`) or plain seconds, in ms. */
export function duration(value: string | null): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  const seconds = count(text);
  if (seconds !== undefined) return seconds * 1_000;
  if (!/^(\d+(\.\d+)?(ms|h|m|s))+$/.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    total += Number(amount) * (UNIT_MS[unit ?? ''] ?? 0);
  }
  return total;
}

function percentile(values: readonly number[], share: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)] ?? null;
}

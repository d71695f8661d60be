/**
 * The circuit breaker of one tool or external dependency (ARCHITECTURE.md, circuit breakers): one
 * state for the whole cluster, owned by the governor and stored in Postgres, so every function
 * here takes the state and returns the next one — JSON-safe, no clocks, no timers.
 *
 * - closed → open when, over a sliding window (`windowMs` in `bucketCount` buckets), at least
 *   `minCalls` calls were seen and the failure share reached `failureRate`, or after
 *   `consecutiveFailures` failures in a row (a dependency that just died trips fast however busy).
 * - open → half_open once the cool-down is over: {@link record} returns the due time so the
 *   caller arms a durable timer ({@link fireCoolDown}); {@link decide} also moves it lazily.
 * - half_open admits at most `probes` calls; `successesToClose` successes close it, one failure
 *   reopens it for another cool-down. A probe that never reports (its executor died) frees its
 *   slot after `probeTimeoutMs`.
 * - Outcomes of calls admitted before the current half-open period began (`admittedAtMs`) are
 *   late answers of the old regime and are ignored there, as is anything recorded while open.
 */

/** How a breaker trips and recovers. */
export interface BreakerConfig {
  readonly windowMs: number;
  readonly bucketCount: number;
  readonly minCalls: number;
  /** Failure share in (0, 1] that opens the breaker. */
  readonly failureRate: number;
  readonly consecutiveFailures: number;
  readonly coolDownMs: number;
  readonly probes: number;
  readonly successesToClose: number;
  readonly probeTimeoutMs: number;
}

export const DEFAULT_BREAKER: BreakerConfig = {
  windowMs: 60_000,
  bucketCount: 6,
  minCalls: 20,
  failureRate: 0.5,
  consecutiveFailures: 5,
  coolDownMs: 30_000,
  probes: 3,
  successesToClose: 3,
  probeTimeoutMs: 60_000,
};

export type BreakerStatus = 'closed' | 'open' | 'half_open';

/** Calls and failures of one slice of the window. */
export interface BreakerBucket {
  readonly startMs: number;
  readonly calls: number;
  readonly failures: number;
}

/** The stored state (JSON-safe). */
export interface BreakerState {
  readonly status: BreakerStatus;
  /** Closed only: the sliding window, oldest first. */
  readonly buckets: readonly BreakerBucket[];
  readonly consecutiveFailures: number;
  /** Open: when the cool-down ends. */
  readonly coolDownUntilMs: number | null;
  /** Half-open: when it began, probes admitted, successes seen, the last probe's admission. */
  readonly halfOpenSinceMs: number | null;
  readonly probesAdmitted: number;
  readonly probeSuccesses: number;
  readonly lastProbeAtMs: number | null;
  /** Why it last opened, for AdminService and logs. */
  readonly reason: string | null;
}

/** A change of status, to log, count and publish. */
export interface BreakerTransition {
  readonly from: BreakerStatus;
  readonly to: BreakerStatus;
  readonly reason: string;
}

export interface BreakerDecision {
  readonly admit: boolean;
  /** Admitted as a half-open probe. */
  readonly probe: boolean;
  /** Not admitted: the earliest time worth asking again (`null`: when a probe reports). */
  readonly retryAtMs: number | null;
  readonly state: BreakerState;
  readonly transition?: BreakerTransition;
}

export interface BreakerRecordResult {
  readonly state: BreakerState;
  readonly transition?: BreakerTransition;
  /** Set when it (re)opened: arm a durable timer for {@link fireCoolDown} at this time. */
  readonly coolDownDueAtMs?: number;
}

/** One finished call. */
export interface BreakerOutcome {
  readonly ok: boolean;
  readonly atMs: number;
  /** When the call was admitted; absent: assumed to belong to the current period. */
  readonly admittedAtMs?: number;
}

export const CLOSED_BREAKER: BreakerState = {
  status: 'closed',
  buckets: [],
  consecutiveFailures: 0,
  coolDownUntilMs: null,
  halfOpenSinceMs: null,
  probesAdmitted: 0,
  probeSuccesses: 0,
  lastProbeAtMs: null,
  reason: null,
};

/** Whether a call may go now; moves an open breaker whose cool-down is over to half-open. */
export function decide(state: BreakerState, nowMs: number, config: BreakerConfig): BreakerDecision {
  if (state.status === 'closed') return { admit: true, probe: false, retryAtMs: null, state };
  if (state.status === 'open') {
    const fired = fireCoolDown(state, nowMs);
    if (fired.state.status === 'open')
      return { admit: false, probe: false, retryAtMs: state.coolDownUntilMs, state };
    const next = decide(fired.state, nowMs, config);
    return fired.transition ? { ...next, transition: fired.transition } : next;
  }
  const probeLost =
    state.lastProbeAtMs !== null && nowMs - state.lastProbeAtMs >= config.probeTimeoutMs;
  const inUse = probeLost ? state.probeSuccesses : state.probesAdmitted;
  if (inUse >= config.probes) {
    const retryAtMs =
      state.lastProbeAtMs === null ? null : state.lastProbeAtMs + config.probeTimeoutMs;
    return { admit: false, probe: false, retryAtMs, state };
  }
  return {
    admit: true,
    probe: true,
    retryAtMs: null,
    state: { ...state, probesAdmitted: inUse + 1, lastProbeAtMs: nowMs },
  };
}

/** The durable cool-down timer fired: open → half-open if it is due (else unchanged). */
export function fireCoolDown(
  state: BreakerState,
  nowMs: number,
): { readonly state: BreakerState; readonly transition?: BreakerTransition } {
  if (state.status !== 'open' || state.coolDownUntilMs === null || nowMs < state.coolDownUntilMs)
    return { state };
  return {
    state: {
      ...state,
      status: 'half_open',
      coolDownUntilMs: null,
      halfOpenSinceMs: nowMs,
      probesAdmitted: 0,
      probeSuccesses: 0,
      lastProbeAtMs: null,
    },
    transition: { from: 'open', to: 'half_open', reason: 'cool-down over' },
  };
}

/** The state after a call's outcome. */
export function record(
  state: BreakerState,
  outcome: BreakerOutcome,
  config: BreakerConfig,
): BreakerRecordResult {
  if (state.status === 'open') return { state };
  if (state.status === 'half_open') {
    const since = state.halfOpenSinceMs ?? Number.NEGATIVE_INFINITY;
    if (outcome.admittedAtMs !== undefined && outcome.admittedAtMs < since) return { state };
    if (!outcome.ok) return open(state, outcome.atMs, 'a half-open probe failed', config);
    const probeSuccesses = state.probeSuccesses + 1;
    if (probeSuccesses < config.successesToClose) return { state: { ...state, probeSuccesses } };
    return {
      state: CLOSED_BREAKER,
      transition: {
        from: 'half_open',
        to: 'closed',
        reason: `${probeSuccesses} probe(s) succeeded`,
      },
    };
  }
  const buckets = addToWindow(state.buckets, outcome, config);
  const consecutiveFailures = outcome.ok ? 0 : state.consecutiveFailures + 1;
  const next: BreakerState = { ...state, buckets, consecutiveFailures };
  if (consecutiveFailures >= config.consecutiveFailures)
    return open(next, outcome.atMs, `${consecutiveFailures} consecutive failures`, config);
  const { calls, failures } = windowTotals(buckets);
  if (!outcome.ok && calls >= config.minCalls && failures / calls >= config.failureRate)
    return open(next, outcome.atMs, `${failures} of ${calls} calls failed in the window`, config);
  return { state: next };
}

/** The calls and failures the window holds. */
export function windowTotals(buckets: readonly BreakerBucket[]): {
  readonly calls: number;
  readonly failures: number;
} {
  let calls = 0;
  let failures = 0;
  for (const bucket of buckets) {
    calls += bucket.calls;
    failures += bucket.failures;
  }
  return { calls, failures };
}

function addToWindow(
  buckets: readonly BreakerBucket[],
  outcome: BreakerOutcome,
  config: BreakerConfig,
): BreakerBucket[] {
  const width = config.windowMs / config.bucketCount;
  const startMs = Math.floor(outcome.atMs / width) * width;
  // The window ends at the newest bucket: a late outcome must not push newer ones out.
  const newest = Math.max(startMs, buckets[buckets.length - 1]?.startMs ?? startMs);
  const oldest = newest - config.windowMs + width;
  const kept = buckets.filter((bucket) => bucket.startMs >= oldest);
  if (startMs < oldest) return kept;
  const failure = outcome.ok ? 0 : 1;
  const index = kept.findIndex((bucket) => bucket.startMs === startMs);
  const bucket = kept[index];
  if (bucket !== undefined) {
    kept[index] = { startMs, calls: bucket.calls + 1, failures: bucket.failures + failure };
    return kept;
  }
  return [...kept, { startMs, calls: 1, failures: failure }].sort((a, b) => a.startMs - b.startMs);
}

function open(
  state: BreakerState,
  atMs: number,
  reason: string,
  config: BreakerConfig,
): BreakerRecordResult {
  const coolDownDueAtMs = atMs + config.coolDownMs;
  return {
    state: {
      ...CLOSED_BREAKER,
      status: 'open',
      coolDownUntilMs: coolDownDueAtMs,
      reason,
    },
    transition: { from: state.status, to: 'open', reason },
    coolDownDueAtMs,
  };
}

/** A problem of a configuration, or `undefined` when it is usable. */
export function breakerConfigProblem(config: BreakerConfig): string | undefined {
  if (!(Number.isFinite(config.windowMs) && config.windowMs > 0))
    return 'windowMs must be positive';
  if (!(Number.isInteger(config.bucketCount) && config.bucketCount >= 1))
    return 'bucketCount must be a positive integer';
  if (!(Number.isInteger(config.minCalls) && config.minCalls >= 1))
    return 'minCalls must be a positive integer';
  if (!(config.failureRate > 0 && config.failureRate <= 1)) return 'failureRate must be in (0, 1]';
  if (!(Number.isInteger(config.consecutiveFailures) && config.consecutiveFailures >= 1))
    return 'consecutiveFailures must be a positive integer';
  if (!(Number.isFinite(config.coolDownMs) && config.coolDownMs >= 0))
    return 'coolDownMs must be 0 or more';
  if (!(Number.isInteger(config.probes) && config.probes >= 1))
    return 'probes must be a positive integer';
  if (!(
    Number.isInteger(config.successesToClose) &&
    config.successesToClose >= 1 &&
    config.successesToClose <= config.probes
  ))
    return 'successesToClose must be a positive integer no larger than probes';
  if (!(Number.isFinite(config.probeTimeoutMs) && config.probeTimeoutMs > 0))
    return 'probeTimeoutMs must be positive';
  return undefined;
}

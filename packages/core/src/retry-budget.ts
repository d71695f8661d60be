/**
 * The retry budget (ARCHITECTURE.md, errors and retries; after Finagle's `RetryBudget`): per
 * resource, retries may add at most `ratio` of the attempts seen over a window, plus a small floor
 * of retries per second for quiet resources. A retry over the budget is not dropped — a task must
 * not fail because others failed — but pushed into the next window with room (at most
 * `maxDeferMs` later), so a burst of failures of one dependency comes back spread out instead of
 * multiplying the load on it while it is down.
 *
 * Retries are counted in fixed windows by the time they are due (not the time they were decided):
 * that is what the dependency will see. Pure: the caller keeps the counts.
 */

/** How the budget is configured. */
export interface RetryBudgetConfig {
  /** Retries allowed per attempt seen in the window (0.2: retries add at most 20 % load). */
  readonly ratio: number;
  /** The window attempts are counted over, and retries placed in, in milliseconds. */
  readonly windowMs: number;
  /** Retries always allowed per second, whatever the attempts (a floor for quiet resources). */
  readonly minRetriesPerSecond: number;
  /** Longest a retry is pushed beyond its backoff; past it, it is due anyway. */
  readonly maxDeferMs: number;
}

/** The defaults of the references: 20 % over 10 s, a floor of 10 retries per second. */
export const DEFAULT_RETRY_BUDGET: RetryBudgetConfig = {
  ratio: 0.2,
  windowMs: 10_000,
  minRetriesPerSecond: 10,
  maxDeferMs: 60_000,
};

/** Retries of one resource allowed per window, given the attempts of its last window. */
export function retriesAllowed(attemptsInWindow: number, config: RetryBudgetConfig): number {
  const floor = (config.minRetriesPerSecond * config.windowMs) / 1_000;
  return Math.floor(floor + config.ratio * Math.max(0, attemptsInWindow));
}

/** The window a time falls in. */
export function windowOf(timeMs: number, config: RetryBudgetConfig): number {
  return Math.floor(timeMs / config.windowMs);
}

/** What {@link placeRetry} looks at. */
export interface RetryPlacementQuestion {
  /** When the backoff wants the retry (epoch milliseconds). */
  readonly dueAt: number;
  /** Attempts of the resource (first tries and retries, any outcome) over the last window. */
  readonly attemptsInWindow: number;
  /** Retries of the resource already placed, by window ({@link windowOf} of their due time). */
  readonly retriesIn: (window: number) => number;
  /** A random number in [0, 1), to spread deferred retries over their window. */
  readonly random: number;
  readonly config: RetryBudgetConfig;
}

/** Where {@link placeRetry} puts a retry. */
export interface RetryPlacement {
  /** When the retry is due (epoch milliseconds), never before the backoff's time. */
  readonly dueAt: number;
  /** How much later than the backoff asked (0 within the budget). */
  readonly deferredMs: number;
  /** The window it is counted in. */
  readonly window: number;
}

/**
 * Places a retry: at its backoff time when that window has room, else at a random time of the
 * first later window with room, else (no room within `maxDeferMs`) at the latest time allowed.
 */
export function placeRetry(question: RetryPlacementQuestion): RetryPlacement {
  const { dueAt, config } = question;
  const allowed = retriesAllowed(question.attemptsInWindow, config);
  const latest = dueAt + Math.max(0, config.maxDeferMs);
  const first = windowOf(dueAt, config);
  const last = windowOf(latest, config);
  for (let window = first; window <= last; window += 1) {
    if (question.retriesIn(window) >= allowed) continue;
    if (window === first) return { dueAt, deferredMs: 0, window };
    const start = window * config.windowMs;
    const spread = Math.floor(Math.min(Math.max(question.random, 0), 1) * config.windowMs);
    const at = Math.min(start + spread, latest);
    return { dueAt: at, deferredMs: at - dueAt, window };
  }
  return { dueAt: latest, deferredMs: latest - dueAt, window: last };
}

/** A problem of a configuration, or `undefined` when it is usable. */
export function retryBudgetProblem(config: RetryBudgetConfig): string | undefined {
  if (!(Number.isFinite(config.ratio) && config.ratio >= 0)) return 'ratio must be 0 or more';
  if (!(Number.isInteger(config.windowMs) && config.windowMs >= 1))
    return 'windowMs must be a positive integer';
  if (!(Number.isFinite(config.minRetriesPerSecond) && config.minRetriesPerSecond >= 0))
    return 'minRetriesPerSecond must be 0 or more';
  if (!(Number.isInteger(config.maxDeferMs) && config.maxDeferMs >= 0))
    return 'maxDeferMs must be a whole number of 0 or more';
  return undefined;
}

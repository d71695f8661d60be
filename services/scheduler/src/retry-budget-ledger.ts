/**
 * The retry budget's counts, per resource, in this scheduler replica's memory: the attempts whose
 * outcomes this replica applied over the last window, and the retries it placed by the window they
 * are due in. Placement is core's `placeRetry`.
 *
 * Per replica, not shared: replicas apply outcomes in batches taken with SKIP LOCKED, so each sees
 * about its share of a resource's attempts and schedules about that share of its retries; the ratio
 * part of the budget holds for the sum as it does for each replica. Only the floor (retries per
 * second) multiplies with the replicas. Counting in Postgres instead would add a query per failure,
 * and the rows do not keep one time per attempt (a retry reuses its step row). A replica that
 * restarts starts with empty counts: its first window allows just the floor.
 */
import { placeRetry, windowOf, type RetryBudgetConfig, type RetryPlacement } from '@sluice/core';

/** The budget of one scheduler replica. */
export interface RetryBudgetLedger {
  readonly config: RetryBudgetConfig;
  /** Counts one finished attempt (an outcome applied) of `resource`. */
  recordAttempt(resource: string, now?: number): void;
  /** Places a retry of `resource` the backoff wants at `dueAt`, and counts it. */
  placeRetry(resource: string, dueAt: number, now?: number): RetryPlacement;
}

interface ResourceCounts {
  /** Times of the attempts of the last window, oldest first. */
  attempts: number[];
  /** Retries placed, by window of their due time. */
  readonly retries: Map<number, number>;
}

/** Creates a ledger; `random` spreads deferred retries (fixed in tests). */
export function createRetryBudgetLedger(
  config: RetryBudgetConfig,
  random: () => number = Math.random,
): RetryBudgetLedger {
  const byResource = new Map<string, ResourceCounts>();
  const countsOf = (resource: string): ResourceCounts => {
    let counts = byResource.get(resource);
    if (!counts) byResource.set(resource, (counts = { attempts: [], retries: new Map() }));
    return counts;
  };
  const prune = (counts: ResourceCounts, now: number) => {
    const since = now - config.windowMs;
    const firstKept = counts.attempts.findIndex((time) => time > since);
    if (firstKept !== 0) {
      counts.attempts = firstKept === -1 ? [] : counts.attempts.slice(firstKept);
    }
    const current = windowOf(now, config);
    for (const window of counts.retries.keys()) {
      if (window < current) counts.retries.delete(window);
    }
  };
  return {
    config,
    recordAttempt(resource, now = Date.now()) {
      const counts = countsOf(resource);
      prune(counts, now);
      counts.attempts.push(now);
    },
    placeRetry(resource, dueAt, now = Date.now()) {
      const counts = countsOf(resource);
      prune(counts, now);
      const placement = placeRetry({
        dueAt,
        attemptsInWindow: counts.attempts.length,
        retriesIn: (window) => counts.retries.get(window) ?? 0,
        random: random(),
        config,
      });
      counts.retries.set(placement.window, (counts.retries.get(placement.window) ?? 0) + 1);
      return placement;
    },
  };
}

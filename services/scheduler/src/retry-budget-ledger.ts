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
  /** Takes back an attempt counted at `at` (its pass rolled back). */
  forgetAttempt(resource: string, at: number): void;
  /** Takes back a retry placed in `window` (its pass rolled back). */
  forgetRetry(resource: string, window: number): void;
}

/** The counts of one pass over a ledger: kept when its transaction commits, else taken back. */
export interface TentativeLedger {
  /** Counts in the ledger at once (later outcomes of the pass see them) and remembers them. */
  readonly ledger: RetryBudgetLedger;
  /** The pass's transaction rolled back: what it counted did not happen. */
  rollBack(): void;
}

/**
 * A pass over `ledger` whose counts can be taken back. The counts live in memory while the pass's
 * writes are in a transaction: without this, a pass that failed (a lost connection, a deadlock)
 * left its retries counted, and the pass that applied the same outcomes again counted them twice,
 * pushing real retries later for room taken by retries that never were.
 */
export function tentativeLedger(ledger: RetryBudgetLedger): TentativeLedger {
  const undo: Array<() => void> = [];
  return {
    ledger: {
      config: ledger.config,
      recordAttempt(resource, now = Date.now()) {
        ledger.recordAttempt(resource, now);
        undo.push(() => ledger.forgetAttempt(resource, now));
      },
      placeRetry(resource, dueAt, now) {
        const placement = ledger.placeRetry(resource, dueAt, now);
        undo.push(() => ledger.forgetRetry(resource, placement.window));
        return placement;
      },
      forgetAttempt: (resource, at) => ledger.forgetAttempt(resource, at),
      forgetRetry: (resource, window) => ledger.forgetRetry(resource, window),
    },
    rollBack() {
      for (const take of undo.splice(0).reverse()) take();
    },
  };
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
    forgetAttempt(resource, at) {
      const attempts = byResource.get(resource)?.attempts;
      const index = attempts?.lastIndexOf(at) ?? -1;
      if (index >= 0) attempts?.splice(index, 1);
    },
    forgetRetry(resource, window) {
      const retries = byResource.get(resource)?.retries;
      const count = retries?.get(window) ?? 0;
      if (count > 1) retries?.set(window, count - 1);
      else retries?.delete(window);
    },
  };
}

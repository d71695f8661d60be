/**
 * What the governor's live decision means for the next claim: held priorities are left out,
 * resources with open breakers admit nothing, the governor's limits (adaptive LLM limit, overrides,
 * half-open probes) cap their resources, and a throttled priority is admitted at most
 * `throttlePerSecond` steps a second by this replica (a token bucket per priority, so a throttle
 * slows low priorities down without stopping them).
 */
import { listsPriority, type DecisionView } from '@sluice/bus';
import { priorityLabel, PRIORITIES, type Priority } from '@sluice/core';
import type { AdmissionSettings, ClaimedStep } from '@sluice/db';
import type { Metrics } from '@sluice/telemetry';

export interface GovernedAdmission {
  /** The settings of the next claim. */
  settings(): AdmissionSettings;
  /** Charges the throttles with what a claim admitted. */
  claimed(steps: readonly ClaimedStep[]): void;
}

export interface GovernedAdmissionOptions {
  readonly base: AdmissionSettings;
  /** The governor's decision; absent: the configured admission only. */
  readonly view?: DecisionView;
  /** Steps a second this replica admits of a throttled priority. */
  readonly throttlePerSecond: number;
  readonly metrics?: Metrics;
  readonly now?: () => number;
}

export function createGovernedAdmission(options: GovernedAdmissionOptions): GovernedAdmission {
  const now = options.now ?? Date.now;
  const rate = options.throttlePerSecond;
  /** Tokens by throttled priority, refilled continuously up to one second's worth. */
  const buckets = new Map<Priority, { tokens: number; atMs: number }>();
  const tokensOf = (priority: Priority, atMs: number): number => {
    const bucket = buckets.get(priority) ?? { tokens: rate, atMs };
    bucket.tokens = Math.min(rate, bucket.tokens + ((atMs - bucket.atMs) / 1_000) * rate);
    bucket.atMs = atMs;
    buckets.set(priority, bucket);
    return bucket.tokens;
  };

  return {
    settings() {
      const decision = options.view?.current();
      if (decision === undefined) return options.base;
      const atMs = now();
      const priorityCaps: Partial<Record<Priority, number>> = {};
      for (const priority of PRIORITIES) {
        if (listsPriority(decision.throttle, priority)) {
          priorityCaps[priority] = Math.floor(tokensOf(priority, atMs));
          options.metrics?.admissionHeld.inc({
            priority: priorityLabel(priority),
            how: 'throttled',
          });
        } else {
          buckets.delete(priority);
        }
      }
      for (const priority of decision.holds) {
        options.metrics?.admissionHeld.inc({ priority: priorityLabel(priority), how: 'held' });
      }
      return {
        ...options.base,
        heldPriorities: decision.holds,
        closedResources: Object.entries(decision.breakers ?? {})
          .filter(([, view]) => view === 'open')
          .map(([resource]) => resource),
        resourceLimits: decision.limits ?? {},
        priorityCaps,
      };
    },
    claimed(steps) {
      for (const step of steps) {
        const bucket = buckets.get(step.priority);
        if (bucket === undefined) continue;
        bucket.tokens = Math.max(0, bucket.tokens - 1);
      }
    },
  };
}

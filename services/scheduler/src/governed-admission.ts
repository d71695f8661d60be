/**
 * What the governor's live decision means for the next claim: held priorities are left out,
 * resources with open breakers admit nothing, the governor's limits (adaptive LLM limit, overrides,
 * half-open probes) cap their resources, and a throttled priority may not take the last
 * `throttleReserve` share of a resource's limit — that headroom stays free for more urgent work, so
 * a P0 arriving under a P3 flood finds a slot at once while P3 still uses the rest.
 */
import { decidedAdmission, type DecisionView } from '@sluice/bus';
import { priorityLabel } from '@sluice/core';
import type { AdmissionSettings } from '@sluice/db';
import type { Metrics } from '@sluice/telemetry';

export interface GovernedAdmission {
  /** The settings of the next claim. */
  settings(): AdmissionSettings;
}

export interface GovernedAdmissionOptions {
  /** The configured admission (limits default, aging, throttle reserve). */
  readonly base: AdmissionSettings;
  /** The governor's decision; absent: the configured admission only. */
  readonly view?: DecisionView;
  readonly metrics?: Metrics;
}

export function createGovernedAdmission(options: GovernedAdmissionOptions): GovernedAdmission {
  return {
    settings() {
      const decision = options.view?.current();
      if (decision === undefined) return options.base;
      const decided = decidedAdmission(decision);
      for (const priority of decided.heldPriorities) {
        options.metrics?.admissionHeld.inc({ priority: priorityLabel(priority), how: 'held' });
      }
      for (const priority of decided.throttledPriorities) {
        options.metrics?.admissionHeld.inc({ priority: priorityLabel(priority), how: 'throttled' });
      }
      return { ...options.base, ...decided };
    },
  };
}

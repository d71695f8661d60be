/**
 * The decision document of one tick, composed from what the governor measured (pressure actions,
 * breaker views, the executors' adaptive LLM limits) and the operators' manual overrides, which
 * win over everything measured until they expire or are cleared.
 */
import type { BreakerView, GovernorDecision, SignalReading } from '@sluice/bus';
import { isPriority, severityOf, type Priority, type PressureLevel } from '@sluice/core';
import type { AssessedReading, PressureActions } from './pressure/levels.js';

/** A manual override as admission needs it (the full row lives in Postgres). */
export interface ActiveOverride {
  readonly kind: 'breaker' | 'priority' | 'limit';
  readonly target: string;
  readonly value: string;
}

export interface DecisionInputs {
  readonly epoch: number;
  readonly holder: string;
  readonly at: Date;
  readonly actions: PressureActions;
  readonly readings: readonly AssessedReading[];
  readonly breakers: Readonly<Record<string, BreakerView>>;
  /** Probes a half-open breaker admits at once. */
  readonly halfOpenProbes: number;
  /** Adaptive limits by resource (the sum of the executors' LLM gates). */
  readonly adaptiveLimits: Readonly<Record<string, number>>;
  readonly overrides: readonly ActiveOverride[];
  /** Retry delay at a rejecting signal's threshold; grows with how far past it the signal is. */
  readonly retryAfterBaseMs: number;
}

/** Longest retry delay a rejection suggests. */
export const MAX_RETRY_AFTER_MS = 60_000;

export function composeDecision(inputs: DecisionInputs): GovernorDecision {
  const { actions } = inputs;
  const holds = new Set(actions.holds);
  const reject = new Set(actions.reject);
  const throttle = new Set(actions.throttle);
  const degrade = new Set(actions.degrade);
  const breakers: Record<string, BreakerView> = { ...inputs.breakers };
  const limits: Record<string, number> = { ...inputs.adaptiveLimits };
  const reasons = [...actions.reasons];
  let level: PressureLevel = actions.level;

  for (const override of inputs.overrides) {
    const note = `override: ${override.kind} ${override.target} ${override.value}`;
    if (override.kind === 'breaker') {
      if (override.value === 'open') breakers[override.target] = 'open';
      else delete breakers[override.target];
    } else if (override.kind === 'limit') {
      const limit = Number(override.value);
      if (Number.isSafeInteger(limit) && limit >= 0) limits[override.target] = limit;
    } else {
      const priority = Number(override.target);
      if (!isPriority(priority)) continue;
      if (override.value === 'hold') {
        holds.add(priority);
        throttle.delete(priority);
        if (severityOf(level) < severityOf('hold_p3')) level = 'hold_p3';
      } else {
        for (const set of [holds, reject, throttle, degrade]) set.delete(priority);
      }
    }
    reasons.push(note);
  }
  // A half-open breaker admits its probes only, whatever else limits the resource.
  for (const [resource, view] of Object.entries(breakers)) {
    if (view === 'half_open')
      limits[resource] = Math.min(limits[resource] ?? Infinity, inputs.halfOpenProbes);
    reasons.push(`breaker ${resource} ${view.replace('_', '-')}`);
  }

  const retryAfterMs =
    reject.size === 0
      ? 0
      : Math.round(
          Math.min(
            MAX_RETRY_AFTER_MS,
            inputs.retryAfterBaseMs * Math.max(1, actions.rejectOverload),
          ),
        );
  const sorted = (set: Set<Priority>) => [...set].sort((a, b) => a - b);
  return {
    epoch: inputs.epoch,
    holder: inputs.holder,
    level: level === 'hold_p3' || level === 'hold_p2' ? 'hold' : level,
    holds: sorted(holds),
    reject: sorted(reject),
    decided_at: inputs.at.toISOString(),
    reasons: reasons.length > 0 ? reasons.slice(0, 32) : ['no pressure'],
    retry_after_ms: retryAfterMs,
    throttle: sorted(throttle),
    degrade: sorted(degrade),
    limits,
    breakers,
    signals: inputs.readings
      .filter((reading) => Number.isFinite(reading.value))
      .slice(0, 256)
      .map((reading): SignalReading => ({
        signal: reading.signal,
        scope: reading.scope,
        value: reading.value,
        level: reading.level,
      })),
  };
}

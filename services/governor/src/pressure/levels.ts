/**
 * From signal readings to the actions of a decision (pure; the caller keeps the book and passes
 * time in).
 *
 * Each (signal, scope) pair moves through the pressure levels with hysteresis. A signal then applies
 * the actions of every level it has thresholds for, up to its current one — worst for the lowest
 * priority first, P0 never held or rejected automatically:
 *
 * | level | action |
 * |---|---|
 * | throttle | P3 kept out of the last share of each resource's limit (the scheduler's reserve) |
 * | degrade | P2 and P3 handlers told to take their degraded path |
 * | hold_p3 | P3 not admitted (P2 throttled) |
 * | hold_p2 | P2 and P3 not admitted |
 * | reject | `CreateTask` of P2 and P3 answered `RESOURCE_EXHAUSTED` with a retry delay |
 */
import {
  PRESSURE_LEVELS,
  initialLevel,
  nextLevel,
  severityOf,
  type LevelState,
  type Priority,
  type PressureLevel,
} from '@sluice/core';
import type { SignalName, ThresholdTable } from './thresholds.js';

/** One measurement. `value` NaN means "nothing to measure now" and keeps the level. */
export interface Reading {
  readonly signal: SignalName;
  /** `all`, a resource, a priority label … */
  readonly scope: string;
  readonly value: number;
}

/**
 * A reading with the level it left its signal at. A reading of nothing (NaN) carries the signal's
 * last measured value, if any, so that the decision still publishes the level it keeps.
 */
export interface AssessedReading extends Reading {
  readonly level: PressureLevel;
}

/** What the readings ask for. */
export interface PressureActions {
  readonly level: PressureLevel;
  readonly throttle: readonly Priority[];
  readonly degrade: readonly Priority[];
  readonly holds: readonly Priority[];
  readonly reject: readonly Priority[];
  /** The readings above `normal`, worst first, in words. */
  readonly reasons: readonly string[];
  /** How far past its reject threshold the worst rejecting signal is (1 = at it); 0 if none. */
  readonly rejectOverload: number;
}

const ACTIONS: Record<Exclude<PressureLevel, 'normal'>, Partial<Record<Action, Priority[]>>> = {
  throttle: { throttle: [3] },
  degrade: { degrade: [2, 3] },
  hold_p3: { holds: [3], throttle: [2] },
  hold_p2: { holds: [2, 3] },
  reject: { reject: [2, 3] },
};
type Action = 'throttle' | 'degrade' | 'holds' | 'reject';

/** The levels of every (signal, scope) seen, kept between ticks by the caller. */
export class PressureBook {
  private readonly states = new Map<string, LevelState>();
  /** The last measured value of each (signal, scope). */
  private readonly lastValues = new Map<string, number>();

  constructor(private readonly table: ThresholdTable) {}

  /**
   * Starts from the levels a previous leader published (its decision's readings), so a change of
   * governor neither drops a hold at once nor re-enters it from `normal`; their dwell restarts now.
   */
  seed(
    levels: ReadonlyArray<{ signal: string; scope: string; level: string; value?: number }>,
    nowMs: number,
  ): void {
    for (const { signal, scope, level, value } of levels) {
      if (!(PRESSURE_LEVELS as readonly string[]).includes(level)) continue;
      const key = `${signal}\u0000${scope}`;
      this.states.set(key, { level: level as PressureLevel, sinceMs: nowMs });
      if (value !== undefined && Number.isFinite(value)) this.lastValues.set(key, value);
    }
  }

  /** Moves every reading's level on and returns the readings with their levels. */
  assess(readings: readonly Reading[], nowMs: number): AssessedReading[] {
    return readings.map((reading) => {
      const key = `${reading.signal}\u0000${reading.scope}`;
      const before = this.states.get(key) ?? initialLevel(nowMs);
      const after = nextLevel(before, reading.value, nowMs, this.table[reading.signal]);
      this.states.set(key, after);
      // A level kept by a reading of nothing is published with the last value measured: the
      // decision's readings leave out values that are not finite, and a next leader resumes the
      // levels of the readings it finds (`seed`), so it would drop the level kept.
      if (!Number.isNaN(reading.value)) this.lastValues.set(key, reading.value);
      const value = Number.isNaN(reading.value)
        ? (this.lastValues.get(key) ?? reading.value)
        : reading.value;
      return { ...reading, value, level: after.level };
    });
  }

  /** The actions of assessed readings. */
  actions(assessed: readonly AssessedReading[]): PressureActions {
    const sets: Record<Action, Set<Priority>> = {
      throttle: new Set(),
      degrade: new Set(),
      holds: new Set(),
      reject: new Set(),
    };
    let level: PressureLevel = 'normal';
    let rejectOverload = 0;
    const pressing = assessed
      .filter((reading) => reading.level !== 'normal')
      .sort((a, b) => severityOf(b.level) - severityOf(a.level));
    for (const reading of pressing) {
      if (severityOf(reading.level) > severityOf(level)) level = reading.level;
      for (const threshold of this.table[reading.signal].thresholds) {
        if (severityOf(threshold.level) > severityOf(reading.level)) continue;
        for (const [action, priorities] of Object.entries(ACTIONS[threshold.level])) {
          for (const priority of priorities) sets[action as Action].add(priority);
        }
        // A reading of nothing (NaN) keeps its level but says nothing of how far past it is.
        if (threshold.level === 'reject' && threshold.enterAt > 0 && !Number.isNaN(reading.value)) {
          rejectOverload = Math.max(rejectOverload, reading.value / threshold.enterAt);
        }
      }
    }
    // A held priority is not also throttled: it is not admitted at all.
    for (const held of sets.holds) sets.throttle.delete(held);
    const sorted = (set: Set<Priority>) => [...set].sort((a, b) => a - b);
    return {
      level,
      throttle: sorted(sets.throttle),
      degrade: sorted(sets.degrade),
      holds: sorted(sets.holds),
      reject: sorted(sets.reject),
      reasons: pressing.map(
        (r) => `${r.signal} ${r.scope} = ${round(r.value)} → ${r.level.replace('_', ' ')}`,
      ),
      rejectOverload,
    };
  }
}

function round(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}

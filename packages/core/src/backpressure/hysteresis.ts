/**
 * Graded pressure levels from a signal, with hysteresis and minimum dwell times
 * (ARCHITECTURE.md, backpressure; BACKPRESSURE-REFERENCES.md, hysteresis): each level is entered
 * when the signal reaches its `enterAt` and left only when the signal falls below its lower
 * `exitAt` *and* the level has been held for its `minDwellMs`. Escalation is immediate — pressure
 * is answered at once — but every step down waits a dwell, so a signal oscillating near a
 * threshold changes the decision at most about twice per dwell time, and one oscillating inside
 * a band (between a level's exit and enter) does not change it at all.
 *
 * Signals where lower is worse (remaining quota) are negated by the caller, thresholds with them.
 * Pure: the caller keeps one {@link LevelState} per signal and passes time in.
 */

/** The levels, from no pressure to the worst; their order is the order of severity. */
export const PRESSURE_LEVELS = [
  'normal',
  'throttle',
  'degrade',
  'hold_p3',
  'hold_p2',
  'reject',
] as const;
export type PressureLevel = (typeof PRESSURE_LEVELS)[number];

/** Severity of a level: 0 for `normal`, higher is worse. */
export function severityOf(level: PressureLevel): number {
  return PRESSURE_LEVELS.indexOf(level);
}

/** When one level is entered and left. */
export interface LevelThreshold {
  readonly level: Exclude<PressureLevel, 'normal'>;
  /** The signal at or above which the level is entered. */
  readonly enterAt: number;
  /** The signal below which the level may be left (≤ `enterAt`: the band between is hysteresis). */
  readonly exitAt: number;
  /** How long the level is held at least before stepping down from it. */
  readonly minDwellMs: number;
}

/** The thresholds of one signal, by increasing severity; a signal may use only some levels. */
export interface HysteresisConfig {
  readonly thresholds: readonly LevelThreshold[];
}

/** What the caller keeps per signal (JSON-safe). */
export interface LevelState {
  readonly level: PressureLevel;
  /** When the current level was entered. */
  readonly sinceMs: number;
}

export function initialLevel(nowMs: number): LevelState {
  return { level: 'normal', sinceMs: nowMs };
}

/** The level after a new reading of the signal. */
export function nextLevel(
  state: LevelState,
  value: number,
  nowMs: number,
  config: HysteresisConfig,
): LevelState {
  if (Number.isNaN(value)) return state;
  const current = severityOf(state.level);
  let entered: PressureLevel = 'normal';
  for (const threshold of config.thresholds)
    if (value >= threshold.enterAt) entered = threshold.level;
  if (severityOf(entered) > current) return { level: entered, sinceMs: nowMs };

  const own = config.thresholds.find((threshold) => threshold.level === state.level);
  // A level this signal has no threshold for (a changed configuration) is left at once.
  if (own !== undefined) {
    if (value >= own.exitAt) return state;
    if (nowMs - state.sinceMs < own.minDwellMs) return state;
  }
  let settled: PressureLevel = 'normal';
  for (const threshold of config.thresholds) {
    if (severityOf(threshold.level) < current && value >= threshold.exitAt)
      settled = threshold.level;
  }
  if (settled === state.level) return state;
  return { level: settled, sinceMs: nowMs };
}

/** One signal's current level, with its value for the cause. */
export interface SignalLevel {
  readonly signal: string;
  readonly level: PressureLevel;
  readonly value: number;
}

/** The worst level over several signals, and the signals that put it there. */
export interface CombinedLevel {
  readonly level: PressureLevel;
  /** The signals at that level (none when `normal`), in the order given. */
  readonly causes: readonly SignalLevel[];
}

export function worstLevel(signals: readonly SignalLevel[]): CombinedLevel {
  let level: PressureLevel = 'normal';
  for (const signal of signals)
    if (severityOf(signal.level) > severityOf(level)) level = signal.level;
  if (level === 'normal') return { level, causes: [] };
  return { level, causes: signals.filter((signal) => signal.level === level) };
}

/** A problem of a configuration, or `undefined` when it is usable. */
export function hysteresisProblem(config: HysteresisConfig): string | undefined {
  let previous: LevelThreshold | undefined;
  for (const threshold of config.thresholds) {
    const { level, enterAt, exitAt, minDwellMs } = threshold;
    if (severityOf(level) < 1) return `unknown level ${String(level)}`;
    if (!(Number.isFinite(enterAt) && Number.isFinite(exitAt)))
      return `${level}: thresholds must be finite`;
    if (exitAt > enterAt) return `${level}: exitAt must not be above enterAt`;
    if (!(Number.isFinite(minDwellMs) && minDwellMs >= 0))
      return `${level}: minDwellMs must be 0 or more`;
    if (previous !== undefined) {
      if (severityOf(level) <= severityOf(previous.level))
        return `${level}: levels must be listed by increasing severity, once each`;
      if (enterAt <= previous.enterAt) return `${level}: enterAt must rise with severity`;
      if (exitAt < previous.exitAt) return `${level}: exitAt must not fall with severity`;
    }
    previous = threshold;
  }
  return undefined;
}

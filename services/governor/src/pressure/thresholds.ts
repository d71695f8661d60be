/**
 * The thresholds of each governor signal: at which value each pressure level is entered and left,
 * and how long a level is held at least (hysteresis, see core `hysteresis.ts`).
 *
 * A signal only acts through the levels it has thresholds for. That is what keeps the governor from
 * deadlocking itself: `queue_depth` has no hold levels, because holding the very work that makes
 * the queue deep would keep it deep forever; it throttles and, past its last threshold, rejects new
 * work (which lets the backlog drain).
 */
import { hysteresisProblem, type HysteresisConfig, type LevelThreshold } from '@sluice/core';

/** The signals of ARCHITECTURE.md, "Backpressure". */
export const SIGNALS = [
  'queue_depth',
  'worker_busy_ratio',
  'llm_rate_limit',
  'tool_error_rate',
  'db_connection_usage',
  'p95_task_latency',
  'retry_storm',
] as const;
export type SignalName = (typeof SIGNALS)[number];

/** Thresholds by signal; a signal without an entry (or with none) never raises the level. */
export type ThresholdTable = Readonly<Record<SignalName, HysteresisConfig>>;

const DWELL_MS = 10_000;

function level(
  name: LevelThreshold['level'],
  enterAt: number,
  exitAt: number,
  minDwellMs = DWELL_MS,
): LevelThreshold {
  return { level: name, enterAt, exitAt, minDwellMs };
}

/**
 * Defaults, chosen for a single-region deployment with executors of tens of slots. Every value is
 * documented in docs/operations.md and can be replaced with `SLUICE_GOVERNOR_THRESHOLDS`.
 */
export const DEFAULT_THRESHOLDS: ThresholdTable = {
  // Ready, due steps over every priority and resource. Only rejects: slowing the admission of
  // the very work that is queued would keep the queue deep; shedding new work lets it drain.
  queue_depth: { thresholds: [level('reject', 50_000, 20_000)] },
  // Busy slots over slots of a resource's executors.
  worker_busy_ratio: { thresholds: [level('throttle', 0.95, 0.8)] },
  // Share of LLM calls answered 429 over the report window. The executors' AIMD probes past the
  // provider's limit by design (a few % of 429s in the steady state), so throttling starts above it.
  llm_rate_limit: {
    thresholds: [
      level('throttle', 0.1, 0.05),
      level('degrade', 0.2, 0.1),
      level('hold_p3', 0.35, 0.15),
    ],
  },
  // Tool errors feed the tool's circuit breaker, not the admission level.
  tool_error_rate: { thresholds: [] },
  // Connections in use over those the server allows.
  db_connection_usage: {
    thresholds: [
      level('throttle', 0.7, 0.6),
      level('hold_p3', 0.8, 0.7),
      level('hold_p2', 0.9, 0.8),
      level('reject', 0.95, 0.85),
    ],
  },
  // p95 wait (ready to started) of P0 and P1 steps, in ms: interactive work waiting holds batch.
  p95_task_latency: {
    thresholds: [level('hold_p3', 5_000, 2_000), level('hold_p2', 15_000, 5_000)],
  },
  // Retries as a share of step attempts started in the window.
  retry_storm: { thresholds: [level('throttle', 0.2, 0.1), level('hold_p3', 0.4, 0.2)] },
};

/**
 * Reads `SLUICE_GOVERNOR_THRESHOLDS`: a JSON object whose keys are signals and whose values are
 * lists of `{ "level", "enter", "exit", "dwell_ms" }`, replacing the defaults of those signals.
 *
 * @returns the table, or a problem in words.
 */
export function parseThresholds(text: string | undefined): ThresholdTable | string {
  if (text === undefined || text.trim() === '') return DEFAULT_THRESHOLDS;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'is not JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'must be a JSON object keyed by signal';
  }
  const table: Record<string, HysteresisConfig> = { ...DEFAULT_THRESHOLDS };
  for (const [signal, list] of Object.entries(value)) {
    if (!(SIGNALS as readonly string[]).includes(signal)) {
      return `names an unknown signal "${signal}" (known: ${SIGNALS.join(', ')})`;
    }
    if (!Array.isArray(list)) return `${signal}: must be a list of thresholds`;
    const thresholds: LevelThreshold[] = [];
    for (const item of list as unknown[]) {
      const t = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
      const dwell = t.dwell_ms ?? DWELL_MS;
      if (
        typeof t.level !== 'string' ||
        typeof t.enter !== 'number' ||
        typeof t.exit !== 'number' ||
        typeof dwell !== 'number'
      ) {
        return `${signal}: each threshold needs a level, numbers enter and exit, and optional dwell_ms`;
      }
      thresholds.push(level(t.level as LevelThreshold['level'], t.enter, t.exit, dwell));
    }
    const config = { thresholds };
    const problem = hysteresisProblem(config);
    if (problem) return `${signal}: ${problem}`;
    table[signal] = config;
  }
  return table as ThresholdTable;
}

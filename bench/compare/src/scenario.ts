/**
 * What a scenario is and what it reports. Scenarios (drain, end-to-end, idle pickup, priority
 * isolation, three-step, footprint) each run one system at a time and return one result.
 */
import type { LedgerVerdict } from './ledger.js';
import type { Progress } from './progress.js';
import type { QueueSystem, SystemInfo } from './system.js';

export interface ScenarioContext {
  /** Jobs in the run. */
  readonly count: number;
  /** Jobs handled at once by the system's workers. */
  readonly concurrency: number;
  readonly progress: Progress;
  /**
   * The system's drain rate (jobs/s) and where it came from, for scenarios that pace arrivals
   * by it (`rates.ts`); undefined when none is known.
   */
  readonly drainRate?: DrainRate;
  /** For a scenario run once per load: arrivals as a percentage of {@link drainRate}. */
  readonly loadPercent?: number;
  /** The results of the command so far (three-step compares with the same system's drain). */
  readonly earlier?: readonly ScenarioResult[];
  /**
   * A smoke run (`--smoke`, the CI suite's): only proves that the harness works, so a scenario may
   * shorten the fixed windows its figures would otherwise need.
   */
  readonly smoke?: boolean;
  /**
   * `--idle-seconds`: how long footprint watches the set-up system doing nothing, after letting it
   * settle for as long; undefined: its short default window, with no settling.
   */
  readonly idleSeconds?: number;
}

export interface DrainRate {
  /** What the system sustains with jobs arriving: end-to-end paces by it. */
  readonly jobsPerSecond: number;
  /**
   * How fast its workers drain a backlog (drain's processing rate; the same as
   * {@link jobsPerSecond} unless measured): priority paces by it, so its high-priority jobs
   * arrive while the backlog lasts.
   */
  readonly processingPerSecond: number;
  /** e.g. `measured by drain in this run`, `--rate-for`, `default table (rates.ts)`. */
  readonly source: string;
}

/** One named figure of a result, e.g. `{ label: 'processing', value: 5120, unit: 'jobs/s' }`. */
export interface Figure {
  readonly key: string;
  readonly label: string;
  readonly value: number;
  readonly unit: string;
}

export interface ScenarioResult {
  readonly scenario: string;
  /** What distinguishes runs of one scenario on one system, e.g. `load 50 %`; absent: nothing. */
  readonly setting?: string;
  readonly system: SystemInfo;
  readonly count: number;
  readonly concurrency: number;
  readonly versions: Record<string, string>;
  /** Absent when the run failed before any job was handled. */
  readonly verdict?: LedgerVerdict;
  /** Only meaningful when {@link ok}. */
  readonly figures: readonly Figure[];
  /** Why the run failed (lost or duplicated work, an error), or undefined when it counts. */
  readonly failure?: string;
  readonly notes: readonly string[];
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly defaultCount: number;
  /** Jobs per run in the full set (`--full`), when larger than the default's (footprint). */
  readonly fullCount?: number;
  readonly smokeCount: number;
  /** Whether the scenario runs once per load (`--load`), with {@link ScenarioContext.loadPercent}. */
  readonly perLoad?: boolean;
  /** Why the scenario does not apply to a system (it is then skipped and listed), or undefined. */
  skip?(system: SystemInfo): string | undefined;
  /** Runs the scenario on a system that is not set up yet; tears it down, also on failure. */
  run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult>;
}

/** A scenario not run on a system, and why. */
export interface SkippedRun {
  readonly scenario: string;
  /** The system's `--systems` name. */
  readonly system: string;
  readonly reason: string;
}

export function ok(result: ScenarioResult): boolean {
  return result.failure === undefined;
}

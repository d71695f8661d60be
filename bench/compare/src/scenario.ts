/**
 * What a scenario is and what it reports. Scenarios (drain now; end-to-end, priority isolation,
 * three-step and footprint to come) each run one system at a time and return one result.
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
  readonly smokeCount: number;
  /** Runs the scenario on a system that is not set up yet; tears it down, also on failure. */
  run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult>;
}

export function ok(result: ScenarioResult): boolean {
  return result.failure === undefined;
}

/**
 * The frame every scenario run shares: set the system up, run the scenario's body, tear the system
 * down (also when the body failed), and judge the run by its ledger — failed when the body threw,
 * did not finish, or any job was lost or handled twice.
 */
import { describeVerdict, type Ledger, type LedgerVerdict } from '../ledger.js';
import { liveSystems } from '../live-systems.js';
import type { Figure, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { QueueSystem, SystemInfo } from '../system.js';
import { systemKey } from '../systems/index.js';

/** Grace after a ledger is complete for late duplicates to show up. */
const DUPLICATE_GRACE_MS = 500;

/** What a scenario's body adds to its result. */
export interface RunFrame {
  readonly figures: Figure[];
  readonly notes: string[];
  /** `<scenario> <system>` for progress lines. */
  readonly label: string;
  /** Why the run did not finish (a timeout), when it did not; the verdict is added to it. */
  incomplete?: string;
}

/** What the frame needs of a system: a queue system, or a chain system (three-step). */
export type FramedSystem = SystemInfo & Pick<QueueSystem, 'setup' | 'teardown' | 'versions'>;

/** What a run is judged by: a ledger of jobs, or of chains. */
export interface RunLedger<Verdict extends LedgerVerdict> {
  verdict(): Verdict;
}

/**
 * Sets the system up, runs `body`, tears the system down (also on failure) and returns the result,
 * failed when the body threw, did not finish or the ledger is not exactly once (`describe` says how;
 * the job ledger's wording by default).
 */
export async function runFramed<Verdict extends LedgerVerdict = LedgerVerdict>(options: {
  readonly scenario: string;
  readonly setting?: string;
  readonly system: FramedSystem;
  readonly context: ScenarioContext;
  readonly ledger: RunLedger<Verdict>;
  readonly describe?: (verdict: Verdict) => string;
  readonly body: (frame: RunFrame) => Promise<void>;
}): Promise<ScenarioResult> {
  const { scenario, setting, system, context, ledger } = options;
  const describe = options.describe ?? describeVerdict;
  const label = [scenario, setting, systemKey(system)].filter((p) => p !== undefined).join(' ');
  const frame: RunFrame = { figures: [], notes: [], label };
  let versions: Record<string, string> = {};
  let failure: string | undefined;
  // Tracked while set up: an interrupted bench tears it down (main.ts), once with this frame.
  const live = liveSystems.track(system);
  try {
    context.progress.update(`${label}: setting up`);
    await live.setup();
    versions = await system.versions();
    await options.body(frame);
  } catch (error) {
    failure = `error: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    context.progress.update(`${label}: tearing down`);
    try {
      await live.teardown();
    } catch (error) {
      frame.notes.push(
        `teardown failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    context.progress.clear();
  }
  const verdict = ledger.verdict();
  if (failure === undefined && !verdict.exactlyOnce) {
    failure = [frame.incomplete, describe(verdict)].filter((p) => p !== undefined).join(': ');
  }
  return {
    scenario,
    ...(setting === undefined ? {} : { setting }),
    system: { name: system.name, durability: system.durability, batched: system.batched },
    count: verdict.expected,
    concurrency: context.concurrency,
    versions,
    verdict,
    figures: frame.figures,
    failure,
    notes: frame.notes,
  };
}

/** Waits until the ledger is complete (or notes the timeout), then the duplicate grace. */
export async function awaitLedger(
  ledger: Ledger,
  frame: RunFrame,
  timeoutMs: number,
): Promise<void> {
  if (!(await ledger.waitComplete(timeoutMs))) {
    frame.incomplete = `not complete after ${Math.round(timeoutMs / 1_000)} s`;
  }
  await new Promise((resolve) => setTimeout(resolve, DUPLICATE_GRACE_MS));
}

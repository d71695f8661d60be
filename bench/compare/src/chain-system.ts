/**
 * What a system offers the three-step scenario (issue 7, workload 4): chains of three steps, each
 * step a job of its own that starts only after the previous one finished — Sluice's multi-step
 * tasks (one resource per step), BullMQ's flows, and the chained jobs of pg-boss and Graphile
 * Worker (a step's handler enqueues the next). Apart from {@link QueueSystem} because a one-step
 * system has no such thing (the raw floors have no chain adapter); adapters in `systems/chains/`.
 *
 * The ledger here keeps one {@link Ledger} per step and checks the order: every chain must run
 * step 0, then 1, then 2, each exactly once, and nothing else.
 */
import { epochNow } from './latency.js';
import { Ledger, type LedgerVerdict } from './ledger.js';
import type { Durability, SystemInfo } from './system.js';

/** Steps of every chain. */
export const CHAIN_STEPS = 3;

/** One chain: its id is unique per run; its steps are numbered 0, 1, 2 in the order they run. */
export interface Chain {
  readonly id: string;
}

/**
 * Told when step `step` (0, 1 or 2) of chain `chainId` starts; the step ends once it resolves.
 * `startedAt` (epoch ms, the clock of `epochNow`) is when the step's handler began where it runs
 * in another process and tells the harness later (Sluice's executors); absent: the call is the
 * start.
 */
export type StepHandler = (chainId: string, step: number, startedAt?: number) => Promise<void>;

export interface ChainStartOptions {
  readonly onStep: StepHandler;
  /**
   * Steps of one kind (step 0, 1 or 2) handled at once: each step has a pool of its own, as
   * Sluice's per-resource executors do (the adapters say how they map it).
   */
  readonly concurrency: number;
}

export interface ChainSystem extends SystemInfo {
  readonly durability: Durability;
  /** Chains are enqueued one at a time here (no batch API is used). */
  readonly batched: false;
  /** Prepares queues, tables, streams (fresh for the run); nothing consumes yet. */
  setup(): Promise<void>;
  /** Enqueues chains as the system accepts them; resolves once all are accepted. */
  enqueue(chains: readonly Chain[]): Promise<void>;
  /** Starts consuming: every step is passed to `onStep` and finished once it resolves. */
  startWorkers(options: ChainStartOptions): Promise<void>;
  /** Stops workers and releases every connection; removes what `setup` created. */
  teardown(): Promise<void>;
  /** Versions of the software under test, for the result table. */
  versions(): Promise<Record<string, string>>;
}

/** What the chain ledger found, beyond each step's ledger. */
export interface ChainVerdict extends LedgerVerdict {
  /** Starts of a step whose previous step had not started before it. */
  readonly outOfOrder: number;
  /** Each step's own verdict (index: step). */
  readonly steps: readonly LedgerVerdict[];
}

/** Every step of every chain, counted; the final step's ledger is the run's completion. */
export class ChainLedger {
  private readonly steps: readonly Ledger[];
  private outOfOrderStarts = 0;
  /** Each step's first start (epoch ms, the clock of `epochNow`), per chain (index: step). */
  private readonly startedAt = new Map<string, number[]>();

  constructor(ids: readonly string[]) {
    this.steps = Array.from({ length: CHAIN_STEPS }, () => new Ledger(ids));
  }

  /** The final step's ledger: a chain is done once its last step started. */
  get final(): Ledger {
    return this.steps[CHAIN_STEPS - 1]!;
  }

  /** Steps started for the first time, over all steps. */
  get stepsHandled(): number {
    return this.steps.reduce((sum, ledger) => sum + ledger.handled, 0);
  }

  /** The first start of any step. */
  get firstAt(): number | undefined {
    const firsts = this.steps.flatMap((l) => (l.firstAt === undefined ? [] : [l.firstAt]));
    return firsts.length === 0 ? undefined : Math.min(...firsts);
  }

  /** Records one start of step `step` of chain `id`, at `startedAt` (default: now). */
  record(id: string, step: number, startedAt: number = epochNow()): void {
    const ledger = this.steps[step];
    if (!Number.isInteger(step) || ledger === undefined) {
      // A step the chain does not have: count it against the final step as unknown work.
      this.final.record(`${id}#step${step}`);
      return;
    }
    const times = this.startedAt.get(id) ?? [];
    if (step > 0 && times[step - 1] === undefined) this.outOfOrderStarts += 1;
    if (times[step] === undefined) {
      times[step] = startedAt;
      this.startedAt.set(id, times);
    }
    ledger.record(id);
  }

  /** A handler for {@link ChainSystem.startWorkers} that records each step it is given. */
  readonly onStep: StepHandler = (chainId, step, startedAt) => {
    this.record(chainId, step, startedAt);
    return Promise.resolve();
  };

  /**
   * Milliseconds from the start of step k to the start of step k + 1 of every chain that ran
   * both (the hand-off between steps, waiting in the next step's queue included).
   */
  hops(): number[] {
    const out: number[] = [];
    for (const times of this.startedAt.values()) {
      for (let step = 1; step < CHAIN_STEPS; step += 1) {
        const from = times[step - 1];
        const to = times[step];
        if (from !== undefined && to !== undefined) out.push(to - from);
      }
    }
    return out;
  }

  verdict(): ChainVerdict {
    const steps = this.steps.map((l) => l.verdict());
    const final = this.final.verdict();
    const duplicates = steps.reduce((sum, v) => sum + v.duplicates, 0);
    const unknown = steps.reduce((sum, v) => sum + v.unknown, 0);
    return {
      expected: final.expected,
      handled: final.handled,
      missing: final.missing,
      duplicates,
      unknown,
      outOfOrder: this.outOfOrderStarts,
      steps,
      exactlyOnce: steps.every((v) => v.exactlyOnce) && this.outOfOrderStarts === 0,
    };
  }
}

/** One line on what went wrong with the chains, for a failed run's table cell. */
export function describeChainVerdict(verdict: ChainVerdict): string {
  if (verdict.exactlyOnce) return `all ${verdict.expected} chains, every step exactly once`;
  const parts = verdict.steps.flatMap((v, step) => {
    const problems = [
      v.missing > 0 ? `${v.missing} missing` : '',
      v.duplicates > 0 ? `${v.duplicates} duplicated` : '',
      v.unknown > 0 ? `${v.unknown} unknown` : '',
    ].filter((p) => p.length > 0);
    return problems.length === 0 ? [] : [`step ${step}: ${problems.join(', ')}`];
  });
  if (verdict.outOfOrder > 0)
    parts.push(`${verdict.outOfOrder} steps started before their previous step`);
  return `${parts.join('; ')} of ${verdict.expected} chains`;
}

/**
 * Three-step (issue 7, workload 4): N chains of three no-op steps — Sluice tasks with three steps
 * on three resources, against each peer's nearest equivalent (BullMQ flows, chained jobs of pg-boss
 * and Graphile Worker; adapters in systems/chains/) — pre-enqueued with the workers stopped, then
 * drained, as drain does for one-step jobs: so what is timed is the systems handing steps on, not
 * the enqueue rate. Reported: chains and steps per second, and the per-step time (processing time
 * per chain ÷ 3), set against the one-step drain of the same system when drain ran earlier in the
 * same command; and the time from a step's start to the next step's start (percentiles) — in a
 * drained backlog mostly the wait behind other chains' steps, so it shows how a system orders a
 * backlog (all first steps before any second one, or chain by chain) more than a hand-off's cost.
 * Every step of every chain must start exactly once and in order (chain-system.ts), or the run
 * failed. Each system runs up to the concurrency of steps of each kind at once (how each adapter
 * maps that is noted with its result), so a chain's steps do not compete for one pool.
 *
 * The scenario is given the harness's one-step system and runs its chain adapter instead, found by
 * the system's `--systems` name; systems without one are skipped.
 */
import { randomBytes } from 'node:crypto';
import {
  CHAIN_STEPS,
  ChainLedger,
  describeChainVerdict,
  type Chain,
  type ChainSystem,
} from '../chain-system.js';
import { summarize } from '../latency.js';
import { ok, type Scenario, type ScenarioContext, type ScenarioResult } from '../scenario.js';
import type { QueueSystem, SystemInfo } from '../system.js';
import { createChainSystem, hasChainAdapter } from '../systems/chains/index.js';
import { systemKey } from '../systems/index.js';
import { enqueueInChunks, processBacklog, processingTimeoutMs, rate } from './backlog.js';
import { runFramed } from './framed-run.js';

export const threeStep: Scenario = {
  name: 'three-step',
  description:
    'N chains of three no-op steps (Sluice: three resources; peers: flows, chained jobs) pre-enqueued, then drained',
  defaultCount: 5_000,
  smokeCount: 30,

  skip(system: SystemInfo): string | undefined {
    if (system.batched) return 'chains are enqueued one at a time: see the one-at-a-time variant';
    if (!hasChainAdapter(systemKey(system))) return 'no chain adapter (no multi-step equivalent)';
    return undefined;
  },

  async run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    const key = systemKey(system);
    const info: SystemInfo = {
      name: system.name,
      durability: system.durability,
      batched: system.batched,
    };
    let chainSystem: ChainSystem;
    try {
      chainSystem = await createChainSystem(key, {
        concurrency: context.concurrency,
        echo: false,
      });
    } catch (error) {
      return {
        scenario: 'three-step',
        system: info,
        count: context.count,
        concurrency: context.concurrency,
        versions: {},
        figures: [],
        failure: `error: ${error instanceof Error ? error.message : String(error)}`,
        notes: [],
      };
    }
    return runChains(chainSystem, key, context);
  },
};

async function runChains(
  system: ChainSystem,
  key: string,
  context: ScenarioContext,
): Promise<ScenarioResult> {
  const { count, concurrency, progress } = context;
  const run = randomBytes(4).toString('hex');
  const chains: Chain[] = Array.from({ length: count }, (_, i) => ({ id: `${run}-${i}` }));
  const ledger = new ChainLedger(chains.map((c) => c.id));
  return runFramed({
    scenario: 'three-step',
    system,
    context,
    ledger,
    describe: describeChainVerdict,
    body: async (frame) => {
      const { figures, notes, label } = frame;
      notes.push(CONCURRENCY_NOTES[key] ?? `${concurrency} steps of each kind at once`);
      const enqueueSeconds = await enqueueInChunks(
        chains,
        (slice) => system.enqueue(slice),
        (enqueued) => progress.update(`${label}: enqueued ${enqueued}/${count} chains`),
      );
      figures.push({
        key: 'enqueue_rate',
        label: 'enqueue',
        value: rate(count, enqueueSeconds),
        unit: 'chains/s',
      });
      if (ledger.stepsHandled > 0) {
        notes.push(`${ledger.stepsHandled} steps were handled before the workers were started`);
      }

      // Timed from the first step of any chain to the start of the last chain's final step, as
      // drain times its one-step jobs.
      const processing = await processBacklog({
        frame,
        completion: ledger.final,
        firstAt: () => ledger.firstAt,
        startWorkers: () => system.startWorkers({ onStep: ledger.onStep, concurrency }),
        timeoutMs: processingTimeoutMs(count * CHAIN_STEPS),
        progressLine: () =>
          `${label}: ${ledger.final.handled}/${count} chains done, ${ledger.stepsHandled}/${count * CHAIN_STEPS} steps`,
        onProgress: (line) => progress.update(line),
      });
      const seconds = processing.seconds;
      const msPerStep = (seconds * 1_000) / (count * CHAIN_STEPS);
      figures.push(
        { key: 'chain_rate', label: 'chains', value: rate(count, seconds), unit: 'chains/s' },
        {
          key: 'step_rate',
          label: 'steps',
          value: rate(count * CHAIN_STEPS, seconds),
          unit: 'steps/s',
        },
        { key: 'processing_s', label: 'processing time', value: seconds, unit: 's' },
        { key: 'ms_per_step', label: 'time per chain ÷ 3', value: msPerStep, unit: 'ms' },
      );
      const drainRate = drainProcessingRate(key, context.earlier ?? []);
      if (drainRate !== undefined) {
        const drainMs = 1_000 / drainRate;
        figures.push(
          { key: 'drain_ms_per_job', label: 'drain time per job', value: drainMs, unit: 'ms' },
          {
            key: 'step_vs_drain',
            label: 'step ÷ drain job',
            value: msPerStep / drainMs,
            unit: '×',
          },
        );
      } else {
        notes.push('no drain of this system earlier in the command: no one-step time to compare');
      }
      const hops = summarize(ledger.hops());
      if (hops !== undefined) {
        figures.push(
          { key: 'hop_p50', label: 'step → next step p50', value: hops.p50, unit: 'ms' },
          { key: 'hop_p95', label: 'step → next step p95', value: hops.p95, unit: 'ms' },
          { key: 'hop_p99', label: 'step → next step p99', value: hops.p99, unit: 'ms' },
        );
      }
      figures.push({
        key: 'first_start_ms',
        label: 'workers start → first step',
        value: processing.first - processing.workersStart,
        unit: 'ms',
      });
    },
  });
}

/** How each adapter maps the harness's concurrency onto its workers (shown with the result). */
const CONCURRENCY_NOTES: Readonly<Record<string, string>> = {
  sluice: 'three executors (one per resource), each with the concurrency as its slots',
  bullmq: 'a flow per chain (step 2 parent of step 1, parent of step 0); a Worker per step queue',
  'bullmq-aof':
    'a flow per chain (step 2 parent of step 1, parent of step 0); a Worker per step queue',
  'pg-boss': 'a queue per step, each worked as the one-step adapter; a step sends its successor',
  'graphile-worker':
    'one runner with 3 × the concurrency (shared by the three tasks); a step adds its successor',
};

/** The processing rate (jobs/s) of the last good drain of `key` in this command, if any. */
function drainProcessingRate(key: string, earlier: readonly ScenarioResult[]): number | undefined {
  return earlier
    .filter((r) => r.scenario === 'drain' && ok(r) && systemKey(r.system) === key)
    .map((r) => r.figures.find((f) => f.key === 'processing_rate')?.value)
    .filter((v): v is number => v !== undefined && v > 0)
    .at(-1);
}

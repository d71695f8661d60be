/**
 * The drain rate each latency scenario paces its arrivals by (end-to-end at 25/50/90 % of it,
 * priority's high-priority jobs at 10 %). In order of preference: `--rate-for system=N`, the rate
 * the drain scenario measured for the same system earlier in the same invocation (the lower of its
 * enqueue and processing rates), and last a table of rates measured on the benchmark machine.
 */
import { ok, type DrainRate, type ScenarioResult } from './scenario.js';
import { systemKey } from './systems/index.js';

/**
 * Sustained rates (jobs/s, concurrency 16: the lower of drain's enqueue and processing rates)
 * measured on the 2-core benchmark machine on 2026-11-30 with `npm run bench -- drain`
 * (1,000–20,000 jobs) — a fallback only, for runs of a latency scenario without drain, and rough:
 * on the shared machine one system's rates varied 2–4× between runs (Sluice 19–93 jobs/s).
 * Systems missing here (the AOF and batched variants) need `--rate-for` or drain in the same command.
 */
export const DEFAULT_DRAIN_RATES: Readonly<Record<string, number>> = {
  'raw-jetstream': 9_000,
  'raw-postgres': 1_100,
  bullmq: 4_000,
  'pg-boss': 550,
  'graphile-worker': 500,
  sluice: 40,
};

/** The drain rate of the system `key` (its `--systems` name), or undefined when none is known. */
export function drainRateOf(
  key: string,
  rateFor: Readonly<Record<string, number>>,
  earlier: readonly ScenarioResult[],
): DrainRate | undefined {
  const given = rateFor[key];
  if (given !== undefined) {
    return { jobsPerSecond: given, processingPerSecond: given, source: '--rate-for' };
  }
  const drained = earlier
    .filter((r) => r.scenario === 'drain' && ok(r) && systemKey(r.system) === key)
    .map(measuredRate)
    .filter((v) => v !== undefined)
    .at(-1);
  if (drained !== undefined) return drained;
  const fallback = DEFAULT_DRAIN_RATES[key];
  return fallback === undefined
    ? undefined
    : {
        jobsPerSecond: fallback,
        processingPerSecond: fallback,
        source: 'default table (bench/compare/src/rates.ts)',
      };
}

/**
 * The rates of a drain result: what the system sustains with jobs arriving is the lower of its
 * enqueue and processing rates (arrivals faster than it accepts them would queue in the client).
 */
function measuredRate(drain: ScenarioResult): DrainRate | undefined {
  const value = (key: string) => drain.figures.find((f) => f.key === key)?.value;
  const enqueue = value('enqueue_rate');
  const processing = value('processing_rate');
  if (enqueue === undefined || processing === undefined || enqueue <= 0 || processing <= 0) {
    return undefined;
  }
  return {
    jobsPerSecond: Math.min(enqueue, processing),
    processingPerSecond: processing,
    source: `measured by drain in this run: enqueue ${Math.round(enqueue)}, processing ${Math.round(processing)} jobs/s`,
  };
}

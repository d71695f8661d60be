/**
 * Latency figures of the scenarios that time single jobs (end-to-end, idle pickup, priority):
 * exact percentiles over every sample (sorted once), no histogram buckets and no sampling, so a
 * p99 of a few hundred jobs is one of the measured values, not an interpolation.
 */
import { performance } from 'node:perf_hooks';

/**
 * Now as epoch milliseconds with sub-millisecond resolution: the clock of `Job.scheduledAt` and of
 * completion times. Monotonic within the process, unlike `Date.now()`.
 */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * The `p`-th percentile (0 < p ≤ 100) of ascending `sorted` by nearest rank: the smallest sample
 * with at least p % of the samples at or below it. Undefined for no samples.
 */
export function percentile(sorted: readonly number[], p: number): number | undefined {
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile ${p} is not in (0, 100]`);
  if (sorted.length === 0) return undefined;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export interface LatencySummary {
  readonly count: number;
  readonly min: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

/** The summary of `samples` (any order; not modified), or undefined when there are none. */
export function summarize(samples: Iterable<number>): LatencySummary | undefined {
  // A typed array sorts numerically (an array of numbers would sort as text).
  const values = Array.from(Float64Array.from(samples).sort());
  const [min] = values;
  const max = values.at(-1);
  if (min === undefined || max === undefined) return undefined;
  let sum = 0;
  for (const value of values) sum += value;
  const at = (p: number) => percentile(values, p) ?? max;
  return {
    count: values.length,
    min,
    p50: at(50),
    p95: at(95),
    p99: at(99),
    max,
    mean: sum / values.length,
  };
}

/**
 * Latencies `end − start` of every id present in both maps (ms); ids without an end are left out
 * (the caller reports how many).
 */
export function latencies(
  starts: ReadonlyMap<string, number>,
  ends: ReadonlyMap<string, number>,
): number[] {
  const out: number[] = [];
  for (const [id, start] of starts) {
    const end = ends.get(id);
    if (end !== undefined) out.push(end - start);
  }
  return out;
}

/** Percentiles of a sample, the way the other benchmarks count them (nearest rank). */

/** p50/p95/p99/max of a sample of waits, in ms; NaN for an empty sample. */
export interface Percentiles {
  readonly n: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

/** The nearest-rank `p`th percentile of an ascending sample. */
export function percentile(sorted: readonly number[], p: number): number {
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)] ?? Number.NaN;
}

export function percentiles(sample: readonly number[]): Percentiles {
  const sorted = [...sample].sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? Number.NaN,
  };
}

/** `12.3 %`, or `–` when the denominator is zero. */
export function share(part: number, whole: number): string {
  return whole > 0 ? `${((part / whole) * 100).toFixed(1)} %` : '–';
}

/** A duration in ms, shortest readable form: `38 ms`, `1.24 s`. */
export function ms(value: number): string {
  if (!Number.isFinite(value)) return '–';
  return value < 1_000 ? `${Math.round(value)} ms` : `${(value / 1_000).toFixed(2)} s`;
}

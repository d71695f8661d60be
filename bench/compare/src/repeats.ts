/**
 * Repeated runs of one scenario on one system, as one result (issue 7: "in the full set each
 * figure is the median of at least 3 runs, with the range"). The median is what the tables and
 * charts show; the range of every figure is in the result's notes. A single failed run fails the
 * whole: work lost or duplicated once is not averaged away.
 */
import type { Figure, ScenarioResult } from './scenario.js';

/** The median of `values` (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error('median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * One result of `runs` (in the order they ran): the first failed run when any failed (noting
 * which), else the first run's result with each figure the median over the runs that have it, and
 * a note with the range of each. The figures of the `warmUps` that went before are discarded
 * (noted), but not what their ledgers found: a warm-up that lost or duplicated work fails the
 * result as a measured run does.
 */
export function combineRuns(
  runs: readonly ScenarioResult[],
  warmUps: readonly ScenarioResult[] = [],
): ScenarioResult {
  const first = runs[0];
  if (!first) throw new Error('no runs to combine');
  const warmUpNote =
    warmUps.length > 0
      ? [`${warmUps.length} warm-up run${warmUps.length === 1 ? '' : 's'} before, discarded`]
      : [];
  const failedWarmUp = warmUps.find((run) => run.failure !== undefined);
  if (failedWarmUp !== undefined) {
    return {
      ...failedWarmUp,
      failure: `warm-up run: ${failedWarmUp.failure}`,
      notes: [...failedWarmUp.notes, ...warmUpNote],
    };
  }
  const failedAt = runs.findIndex((run) => run.failure !== undefined);
  if (failedAt >= 0) {
    const failed = runs[failedAt]!;
    return runs.length === 1
      ? failed
      : {
          ...failed,
          failure: `run ${failedAt + 1} of ${runs.length}: ${failed.failure}`,
          notes: [...failed.notes, ...warmUpNote],
        };
  }
  if (runs.length === 1) return { ...first, notes: [...first.notes, ...warmUpNote] };
  const figures: Figure[] = [];
  const ranges: string[] = [];
  // Every figure any run has, in the order first seen: one the first run lacks (a CPU window too
  // short to close, a process role it did not see) is still the median of the runs that have it.
  const keys = new Map<string, Figure>();
  for (const figure of runs.flatMap((run) => run.figures)) {
    if (!keys.has(figure.key)) keys.set(figure.key, figure);
  }
  for (const figure of keys.values()) {
    const values = runs
      .map((run) => run.figures.find((f) => f.key === figure.key)?.value)
      .filter((value): value is number => value !== undefined && Number.isFinite(value));
    if (values.length === 0) continue;
    figures.push({ ...figure, value: median(values) });
    const some = values.length < runs.length ? ` (${values.length} of ${runs.length} runs)` : '';
    ranges.push(
      `${figure.label} ${compact(Math.min(...values))}–${compact(Math.max(...values))}${figure.unit ? ` ${figure.unit}` : ''}${some}`,
    );
  }
  return {
    ...first,
    figures,
    notes: [
      ...first.notes,
      ...warmUpNote,
      `median of ${runs.length} runs; ranges: ${ranges.join('; ')}`,
    ],
  };
}

function compact(value: number): string {
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3);
}

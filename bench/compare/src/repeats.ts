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
 * Notes that say a run was not clean — its teardown failed (something may be left behind), jobs
 * ran before the workers were started, completions went unseen, a reading failed, the harness
 * sent late — by where they are written. Every run's are kept: a later run's would otherwise
 * vanish behind the first run's notes. The other notes say what was measured, alike from run to
 * run, and the first run's stand for all (the figures' ranges say how the runs differed).
 */
const FAILURE_LIKE_NOTES: readonly RegExp[] = [
  /^teardown failed: /, // framed-run.ts
  / were handled before the workers were started$/, // drain, priority, footprint, three-step
  /^completion seen for /, // end-to-end
  /^processes\(\) failed: /, // end-to-end, footprint
  /^Postgres per job: not read /, // postgres-work.ts
  /^the harness sent /, // arrivals.ts: a busy machine
];

export function failureLike(note: string): boolean {
  return FAILURE_LIKE_NOTES.some((pattern) => pattern.test(note));
}

/** Each failure-like note of the runs once, with the runs it came from: `… (runs 2, 3 of 3)`. */
function failureLikeNotes(
  runs: readonly ScenarioResult[],
  warmUps: readonly ScenarioResult[],
): string[] {
  const from = new Map<string, { warmUps: number[]; runs: number[] }>();
  const collect = (results: readonly ScenarioResult[], kind: 'warmUps' | 'runs') => {
    results.forEach((result, index) => {
      for (const note of new Set(result.notes.filter(failureLike))) {
        const seen = from.get(note) ?? { warmUps: [], runs: [] };
        seen[kind].push(index + 1);
        from.set(note, seen);
      }
    });
  };
  collect(warmUps, 'warmUps');
  collect(runs, 'runs');
  // `run 2 of 3`, `runs 2, 3 of 3`; `warm-up run` or `measured run` when there was one of them.
  const which = (kind: 'warm-up' | 'measured', indices: readonly number[], of: number) => {
    if (of === 1) return `${kind} run`;
    const listed = `${indices.length === 1 ? 'run' : 'runs'} ${indices.join(', ')} of ${of}`;
    return kind === 'warm-up' ? `warm-up ${listed}` : listed;
  };
  return [...from].map(([note, seen]) => {
    const parts = [
      ...(seen.warmUps.length > 0 ? [which('warm-up', seen.warmUps, warmUps.length)] : []),
      ...(seen.runs.length > 0 ? [which('measured', seen.runs, runs.length)] : []),
    ];
    return `${note} (${parts.join('; ')})`;
  });
}

/**
 * One result of `runs` (in the order they ran): the first failed run when any failed (noting
 * which), else the first run's result with each figure the median over the runs that have it, and
 * a note with the range of each. The figures of the `warmUps` that went before are discarded
 * (noted), but not what their ledgers found: a warm-up that lost or duplicated work fails the
 * result as a measured run does. The failure-like notes of every run, warm-ups too, are kept.
 */
export function combineRuns(
  runs: readonly ScenarioResult[],
  warmUps: readonly ScenarioResult[] = [],
): ScenarioResult {
  const first = runs[0];
  if (!first) throw new Error('no runs to combine');
  if (runs.length === 1 && warmUps.length === 0) return first;
  const warmUpNote =
    warmUps.length > 0
      ? [`${warmUps.length} warm-up run${warmUps.length === 1 ? '' : 's'} before, discarded`]
      : [];
  // One result's notes without its failure-like ones, then every run's of those.
  const flagged = failureLikeNotes(runs, warmUps);
  const notesOf = (result: ScenarioResult, ...more: string[]) => [
    ...result.notes.filter((note) => !failureLike(note)),
    ...warmUpNote,
    ...more,
    ...flagged,
  ];
  const failedWarmUp = warmUps.find((run) => run.failure !== undefined);
  if (failedWarmUp !== undefined) {
    return {
      ...failedWarmUp,
      failure: `warm-up run: ${failedWarmUp.failure}`,
      notes: notesOf(failedWarmUp),
    };
  }
  const failedAt = runs.findIndex((run) => run.failure !== undefined);
  if (failedAt >= 0) {
    const failed = runs[failedAt]!;
    return {
      ...failed,
      ...(runs.length === 1
        ? {}
        : { failure: `run ${failedAt + 1} of ${runs.length}: ${failed.failure}` }),
      notes: notesOf(failed),
    };
  }
  if (runs.length === 1) return { ...first, notes: notesOf(first) };
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
    notes: notesOf(first, `median of ${runs.length} runs; ranges: ${ranges.join('; ')}`),
  };
}

function compact(value: number): string {
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3);
}

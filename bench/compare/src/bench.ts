/**
 * Runs scenarios on systems, one system at a time (they share the machine; running them together
 * would measure their contention), and writes the results (main.ts is the command line around it).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as prettier from 'prettier';
import { liveSystems } from './live-systems.js';
import { compareMachine, finishMachine } from './machine.js';
import { Progress } from './progress.js';
import { drainRateOf } from './rates.js';
import { combineRuns } from './repeats.js';
import { CHARTS, markdown, type BenchReport } from './report.js';
import type { Figure, ScenarioResult, SkippedRun } from './scenario.js';
import { DEFAULT_LOADS } from './scenarios/end-to-end.js';
import { SCENARIOS } from './scenarios/index.js';
import { dropOwnTemplates } from './systems/sluice.js';
import { loadSystems, systemKey } from './systems/index.js';

export interface BenchOptions {
  readonly scenarios: readonly string[];
  readonly systems: readonly string[];
  /** Jobs per run; undefined: each scenario's default (or its smoke count). */
  readonly count?: number;
  /** Jobs per run of particular systems (by `--systems` name), over `count`. */
  readonly countFor?: Readonly<Record<string, number>>;
  readonly smoke: boolean;
  readonly concurrency: number;
  /** Loads (% of the drain rate) of the scenarios run once per load; default {@link DEFAULT_LOADS}. */
  readonly loads?: readonly number[];
  /** Drain rates (jobs/s) by `--systems` name, over measured and default ones (rates.ts). */
  readonly rateFor?: Readonly<Record<string, number>>;
  /** Measured runs of each scenario on each system (the median is reported); default 1. */
  readonly runs?: number;
  /** Runs before the measured ones, discarded (JIT, caches, first connections); default 0. */
  readonly warmUps?: number;
  /** Use each scenario's full-set count (e.g. footprint's 100,000-job backlog) when it has one. */
  readonly full?: boolean;
  /** Footprint's idle window in seconds, after as long a settle (`--idle-seconds`). */
  readonly idleSeconds?: number;
  readonly echo: boolean;
  /** Show progress on stderr. */
  readonly progress: boolean;
  readonly command: string;
  /** Aborted when the bench is interrupted: no further run starts, and no report is returned. */
  readonly signal?: AbortSignal;
}

export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const systems = await loadSystems();
  for (const name of options.systems) {
    if (!systems.has(name)) {
      throw new Error(`unknown system ${name} (known: ${[...systems.keys()].join(', ')})`);
    }
  }
  // A value for a system it does not know would be ignored (a typo in --rate-for: the latency
  // scenarios paced by the default table instead).
  const perSystem = [
    ['--count-for', options.countFor],
    ['--rate-for', options.rateFor],
  ] as const;
  for (const [flag, values] of perSystem) {
    for (const name of Object.keys(values ?? {})) {
      if (!systems.has(name)) {
        throw new Error(
          `${flag} names an unknown system ${name} (known: ${[...systems.keys()].join(', ')})`,
        );
      }
    }
  }
  for (const name of options.scenarios) {
    if (!SCENARIOS.has(name)) {
      throw new Error(`unknown scenario ${name} (known: ${[...SCENARIOS.keys()].join(', ')})`);
    }
  }
  const progress = new Progress(options.progress);
  const startedAt = new Date();
  const machine = await compareMachine();
  const results: ScenarioResult[] = [];
  const skipped: SkippedRun[] = [];
  try {
    for (const scenarioName of options.scenarios) {
      const scenario = SCENARIOS.get(scenarioName)!;
      const count =
        options.count ??
        (options.smoke
          ? scenario.smokeCount
          : options.full
            ? (scenario.fullCount ?? scenario.defaultCount)
            : scenario.defaultCount);
      const warmUps = options.warmUps ?? 0;
      const measured = options.runs ?? 1;
      const loads: ReadonlyArray<number | undefined> = scenario.perLoad
        ? (options.loads ?? DEFAULT_LOADS)
        : [undefined];
      for (const systemName of options.systems) {
        const create = () =>
          systems.get(systemName)!({ concurrency: options.concurrency, echo: options.echo });
        // Adapters do no I/O before `setup`: an instance tells whether the scenario applies.
        const reason = scenario.skip?.(create());
        if (reason !== undefined) {
          skipped.push({ scenario: scenario.name, system: systemName, reason });
          progress.log(`${scenario.name} ${systemName}: skipped (${reason})`);
          continue;
        }
        for (const loadPercent of loads) {
          const drainRate = drainRateOf(systemName, options.rateFor ?? {}, results);
          const runs: ScenarioResult[] = [];
          const warmUpRuns: ScenarioResult[] = [];
          for (let index = 0; index < warmUps + measured; index += 1) {
            options.signal?.throwIfAborted();
            const result = await scenario.run(create(), {
              count: options.countFor?.[systemName] ?? count,
              concurrency: options.concurrency,
              progress,
              ...(drainRate === undefined ? {} : { drainRate }),
              ...(loadPercent === undefined ? {} : { loadPercent }),
              earlier: results,
              ...(options.smoke ? { smoke: true } : {}),
              ...(options.idleSeconds === undefined ? {} : { idleSeconds: options.idleSeconds }),
            });
            // A run an interrupt failed is no result to show.
            options.signal?.throwIfAborted();
            const label = index < warmUps ? 'warm-up' : `run ${index - warmUps + 1}/${measured}`;
            if (warmUps + measured > 1) progress.log(`${summary(result)} (${label})`);
            (index < warmUps ? warmUpRuns : runs).push(result);
          }
          const result = combineRuns(runs, warmUpRuns);
          results.push(result);
          progress.log(summary(result));
        }
      }
    }
  } finally {
    await dropOwnTemplates().catch(() => undefined);
  }
  // The runs under way when the bench was interrupted failed of it: a report would show that.
  options.signal?.throwIfAborted();
  return {
    startedAt,
    machine: finishMachine(machine),
    results,
    skipped,
    command: options.command,
  };
}

/**
 * Tears down the systems set up now and drops the templates this process built, refusing further
 * setups: what the bench does on Ctrl-C or SIGTERM before it exits. Failures go to stderr.
 */
export async function tearDownInterrupted(): Promise<void> {
  const report = (error: unknown) =>
    process.stderr.write(
      `teardown failed: ${error instanceof Error ? error.message : String(error)}\n`,
    );
  await liveSystems.stop(report);
  await dropOwnTemplates().catch(report);
}

/** One line per result for the terminal. */
export function summary(result: ScenarioResult): string {
  const head = [result.scenario, result.setting, systemKey(result.system)]
    .filter((p) => p !== undefined)
    .join(' ');
  if (result.failure !== undefined) return `${head}: FAILED (${result.failure})`;
  const shown = (f: Figure) =>
    f.unit === 'jobs/s' ||
    f.unit === '×' ||
    f.unit === 'chains/s' ||
    /^(start|complete|high_backlog|high_backlog_settled|high_idle)_p(50|99)$/.test(f.key);
  const figures = result.figures
    .filter(shown)
    .map((f) => `${f.label} ${f.value.toFixed(f.unit === 'jobs/s' ? 0 : 1)} ${f.unit}`)
    .join(', ');
  return `${head}: ${figures}; every job exactly once`;
}

/** Writes results.md and a chart per scenario that has one (drain.svg, end-to-end.svg …) into `dir`. */
export async function writeReport(report: BenchReport, dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const written = [path.join(dir, 'results.md')];
  // Formatted as the repository's `prettier --check` expects, so a fresh result passes the checks.
  const config = (await prettier.resolveConfig(written[0]!)) ?? {};
  await writeFile(
    written[0]!,
    await prettier.format(markdown(report), { ...config, filepath: written[0]! }),
  );
  for (const [scenario, chart] of Object.entries(CHARTS)) {
    if (!report.results.some((r) => r.scenario === scenario)) continue;
    const svg = path.join(dir, `${scenario}.svg`);
    await writeFile(svg, chart(report));
    written.push(svg);
  }
  return written;
}

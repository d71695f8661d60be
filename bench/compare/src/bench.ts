/**
 * Runs scenarios on systems, one system at a time (they share the machine; running them together
 * would measure their contention), and writes the results (main.ts is the command line around it).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import * as prettier from 'prettier';
import { compareMachine, loadNow } from './machine.js';
import { Progress } from './progress.js';
import { drainSvg, markdown, type BenchReport } from './report.js';
import type { ScenarioResult } from './scenario.js';
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
  readonly echo: boolean;
  /** Show progress on stderr. */
  readonly progress: boolean;
  readonly command: string;
}

export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const systems = await loadSystems();
  for (const name of options.systems) {
    if (!systems.has(name)) {
      throw new Error(`unknown system ${name} (known: ${[...systems.keys()].join(', ')})`);
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
  try {
    for (const scenarioName of options.scenarios) {
      const scenario = SCENARIOS.get(scenarioName)!;
      const count = options.count ?? (options.smoke ? scenario.smokeCount : scenario.defaultCount);
      for (const systemName of options.systems) {
        const system = systems.get(systemName)!({
          concurrency: options.concurrency,
          echo: options.echo,
        });
        const result = await scenario.run(system, {
          count: options.countFor?.[systemName] ?? count,
          concurrency: options.concurrency,
          progress,
        });
        results.push(result);
        progress.log(summary(result));
      }
    }
  } finally {
    await dropOwnTemplates().catch(() => undefined);
  }
  return {
    startedAt,
    machine: { ...machine, loadAtEnd: loadNow() },
    results,
    command: options.command,
  };
}

/** One line per result for the terminal. */
export function summary(result: ScenarioResult): string {
  const head = `${result.scenario} ${systemKey(result.system)}`;
  if (result.failure !== undefined) return `${head}: FAILED (${result.failure})`;
  const figures = result.figures
    .filter((f) => f.unit === 'jobs/s')
    .map((f) => `${f.label} ${Math.round(f.value)} ${f.unit}`)
    .join(', ');
  return `${head}: ${figures}; every job exactly once`;
}

/** Writes results.md and (when the report has drain results) drain.svg into `dir`. */
export async function writeReport(report: BenchReport, dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const written = [path.join(dir, 'results.md')];
  // Formatted as the repository's `prettier --check` expects, so a fresh result passes the checks.
  const config = (await prettier.resolveConfig(written[0]!)) ?? {};
  await writeFile(
    written[0]!,
    await prettier.format(markdown(report), { ...config, filepath: written[0]! }),
  );
  if (report.results.some((r) => r.scenario === 'drain')) {
    const svg = path.join(dir, 'drain.svg');
    await writeFile(svg, drainSvg(report));
    written.push(svg);
  }
  return written;
}

/**
 * The side-by-side benchmark (issue 7):
 *
 *   npm run bench -- [scenario[,scenario…]|all] [--systems a,b] [--count N] [--count-for s=N,…]
 *                    [--load P,…] [--rate-for s=N,…] [--concurrency N] [--smoke] [--out DIR] [--echo]
 *
 * runs each scenario on each system in turn, shows progress on stderr, prints one line per result
 * and writes docs/benchmarks/results.md and a chart per scenario (or into --out). Exits 1 when any run lost or
 * duplicated work or failed. See docs/benchmarks/README.md.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runBench, tearDownInterrupted, writeReport } from './bench.js';
import { DEFAULT_LOADS, FULL_LOADS } from './scenarios/end-to-end.js';
import { DEFAULT_SCENARIOS, SCENARIOS } from './scenarios/index.js';
import { loadSystems } from './systems/index.js';
import { settingsPrefix, sluiceServiceSettings } from './systems/sluice-settings.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DEFAULT_CONCURRENCY = 16;
/** Measured runs of each figure in the full set (the issue: the median of at least 3). */
const FULL_RUNS = 3;

const USAGE = `usage: npm run bench -- [scenario[,scenario…]|all] [options]

scenarios: ${[...SCENARIOS.keys()].join(', ')} (all: ${DEFAULT_SCENARIOS.join(', ')})
  --systems a,b       systems to run (default: all known)
  --count N           jobs per run (default: the scenario's, e.g. drain 20000)
  --count-for s=N,…   jobs per run of some systems (e.g. sluice=2000 when a full run is too long)
  --load P,…          end-to-end arrivals as % of the drain rate, one run each
                      (default ${DEFAULT_LOADS.join(',')}; the full set: ${FULL_LOADS.join(',')})
  --rate-for s=N,…    drain rate (jobs/s) the latency scenarios pace by, per system; otherwise
                      the rate drain measured earlier in the same command, else rates.ts
  --concurrency N     jobs handled at once by each system (default ${DEFAULT_CONCURRENCY})
  --runs N            measured runs of each scenario on each system, the median reported with
                      the range in the notes (default 1; --full: ${FULL_RUNS})
  --full              the full set: every scenario (with three-step), loads ${FULL_LOADS.join(',')},
                      full-set counts (footprint: a 100,000-job backlog), one warm-up run
                      discarded, then ${FULL_RUNS} runs each — hours, not minutes
  --idle-seconds N    footprint: watch each set-up system this long doing nothing, after letting
                      it settle as long (default: 2 s at once; loops that slow down while idle,
                      as Sluice's scheduler does, need ~10 s to settle)
  --smoke             tiny counts, to check the harness
  --out DIR           where to write results.md and the charts (default docs/benchmarks)
  --echo              print the output of the systems' own processes

environment: SLUICE_* and OTEL_* variables reach Sluice's services (e.g.
  SLUICE_PRIORITY_AGING_MS=0, or OTEL_EXPORTER_OTLP_ENDPOINT to trace a run); the report's
  command line names them
`;

/** Aborted on the first SIGINT or SIGTERM. */
const interrupted = new AbortController();

/**
 * The first signal tears down the system under test (and whatever else is set up), then exits
 * non-zero without a report; a second exits at once. Node's default would end the process at
 * once, leaving databases, NATS streams, Redis keys and processes behind.
 */
function exitOnSignals(): void {
  const onSignal = (signal: NodeJS.Signals) => {
    const code = signal === 'SIGTERM' ? 143 : 130;
    if (interrupted.signal.aborted) {
      process.stderr.write(`\n${signal} again: exiting without finishing the teardown\n`);
      process.exit(code);
    }
    interrupted.abort(new Error(`interrupted (${signal})`));
    process.stderr.write(`\n${signal}: tearing down the system under test …\n`);
    void tearDownInterrupted().finally(() => process.exit(code));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      systems: { type: 'string' },
      count: { type: 'string' },
      'count-for': { type: 'string' },
      load: { type: 'string' },
      'rate-for': { type: 'string' },
      concurrency: { type: 'string' },
      runs: { type: 'string' },
      full: { type: 'boolean', default: false },
      'idle-seconds': { type: 'string' },
      smoke: { type: 'boolean', default: false },
      out: { type: 'string' },
      echo: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  // A second argument would be ignored: `drain end-to-end` ran drain alone, without a word.
  if (positionals.length > 1) {
    throw new Error(
      `scenarios are one argument, comma-separated: ${positionals.join(',')}, not ${positionals.join(' ')}`,
    );
  }
  const which = positionals[0] ?? 'all';
  // Several in one command (e.g. drain,end-to-end) let the latency scenarios pace by drain's rates.
  const scenarios =
    which === 'all'
      ? values.full
        ? [...SCENARIOS.keys()]
        : DEFAULT_SCENARIOS
      : which.split(',').map((s) => s.trim());
  const known = await loadSystems();
  const systems = values.systems
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0) ?? [...known.keys()];
  // Nothing to run would still replace the results with an empty report.
  if (systems.length === 0) throw new Error('--systems names no system');
  const count = positiveInt(values.count, '--count');
  const countFor = perSystem(values['count-for'], '--count-for');
  const rateFor = perSystem(values['rate-for'], '--rate-for');
  const runs = positiveInt(values.runs, '--runs') ?? (values.full ? FULL_RUNS : 1);
  const loads = values.load?.split(',').map((p) => {
    const load = positiveInt(p.trim(), '--load')!;
    if (load > 100) throw new Error('--load is a percentage of the drain rate, at most 100');
    return load;
  });
  const concurrency = positiveInt(values.concurrency, '--concurrency') ?? DEFAULT_CONCURRENCY;
  const idleSeconds = positiveInt(values['idle-seconds'], '--idle-seconds');
  exitOnSignals();
  const report = await runBench({
    scenarios,
    systems,
    count,
    countFor,
    ...(loads === undefined ? (values.full ? { loads: FULL_LOADS } : {}) : { loads }),
    runs,
    // The full set discards one run first; a single run has in-scenario warm-up jobs only.
    warmUps: values.full ? 1 : 0,
    full: values.full,
    ...(idleSeconds === undefined ? {} : { idleSeconds }),
    rateFor,
    smoke: values.smoke,
    concurrency,
    echo: values.echo,
    progress: true,
    command: benchCommand(),
    signal: interrupted.signal,
  });
  const written = await writeReport(
    report,
    path.resolve(REPO_ROOT, values.out ?? 'docs/benchmarks'),
  );
  process.stdout.write(`wrote ${written.map((f) => path.relative(REPO_ROOT, f)).join(', ')}\n`);
  return report.results.every((r) => r.failure === undefined) ? 0 : 1;
}

/**
 * The command line the report names: the services' settings taken from the environment first
 * (sluice-settings.ts), then this invocation.
 */
function benchCommand(): string {
  const settings = settingsPrefix(sluiceServiceSettings(process.env));
  const invocation = `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim();
  return settings === '' ? invocation : `${settings} ${invocation}`;
}

/** `a=1,b=2` as `{ a: 1, b: 2 }` (positive integers). */
function perSystem(text: string | undefined, flag: string): Record<string, number> {
  return Object.fromEntries(
    (text ?? '')
      .split(',')
      .filter((pair) => pair.trim().length > 0)
      .map((pair) => {
        const [system = '', n] = pair.split('=');
        return [system.trim(), positiveInt(n ?? '', `${flag} ${system}`)!];
      }),
  );
}

function positiveInt(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} must be a positive integer`);
  return value;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // Interrupted: the signal's handler tears down and exits.
    if (interrupted.signal.aborted) return;
    process.stderr.write(
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n\n${USAGE}`,
    );
    process.exitCode = 2;
  },
);

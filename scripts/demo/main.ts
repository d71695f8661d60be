/**
 * `npm run demo` (through scripts/demo.mjs, which prepares NATS and Postgres and sets NATS_URL and
 * DATABASE_URL): starts a fake LLM and a fake web site on loopback and the services as child
 * processes (an executor for each resource the built-in task types use), creates a fresh tenant,
 * sends one bad request and a mixed batch of `research-brief` tasks, then one task of each other
 * sample type — a research report whose approval is answered with the `sluice` CLI binary, a
 * document ingestion batch and an agent loop — prints every task event as it arrives, then what
 * each task produced, and stops everything.
 *
 * It uses the configured database (`sluice` by default) and the default `sluice` prefix
 * (SLUICE_PREFIX overrides it), like `npm start`. Runs stay apart because each has its own tenant
 * `demo-<random>` and every task it creates has ended (or been cancelled) before it exits. A private
 * prefix per run would not isolate more — the ready queue is the shared database, whose steps any
 * connected scheduler claims — so the demo refuses to run while another stack (a running
 * `npm start`, another demo) is connected to the database.
 *
 * Exits 0 when every task ended as planned and every service stopped cleanly, 1 otherwise, 2 on a
 * bad configuration value or argument, 129/130/143 when interrupted (SIGHUP, SIGINT, SIGTERM; 141
 * when stdout closes). `--verbose` also prints the services' logs.
 */
import { randomBytes } from 'node:crypto';
import {
  createApiKey,
  createTenant,
  migrateDatabase,
  openDatabase,
  type DatabaseHandle,
} from '@sluice/db';
import { COMMON_ENV, ConfigError, intVar, loadEnvConfig, type EnvConfig } from '@sluice/runtime';
import { createTaskClient } from '@sluice/sdk/client';
import { startFakeLlmServer } from '../../test/support/fake-llm-server.js';
import { DEFAULT_PAGES, startFakeWebServer } from '../../test/support/fake-web-server.js';
import { startStack, type Stack } from '../../test/support/stack.js';
import { demoBatch } from './batch.js';
import { showBadRequest } from './bad-request.js';
import { cancelUnfinished } from './leftovers.js';
import { DEMO_APPLICATION_NAME, otherServicesConnected, otherStackProblem } from './preflight.js';
import { shortId } from './progress.js';
import { runBatch, type BatchResult } from './run-batch.js';
import { runSamples, type SampleResult } from './run-samples.js';
import { sampleReport, type SampleSummary } from './sample-report.js';
import { SAMPLE_PAGES, sampleTasks } from './samples.js';
import { finalProblem } from './scenario.js';
import { SLUICE_BIN } from './sluice-cli.js';
import { summaryTable, type StepSummary, type TaskSummary } from './summary.js';
import { ingestedRowsOf, stepsOf } from './task-records.js';
import { resourcesOfTaskModules } from '../start/resources.js';
import { parseCommandLine } from '../lib/command-line.js';
import { paint, redactNatsUrl, redactUrl } from '../lib/terminal.js';

/** Longest the batch may take from the first submission to the last final state. */
const BATCH_DEADLINE_MS = 60_000;
/** Longest the sample tasks may take from the first submission to the last final state. */
const SAMPLES_DEADLINE_MS = 60_000;
/** Steps each executor runs at once: few, so that tasks queue and the priorities show. */
const DEMO_SLOTS = 2;
/** Simulated thinking time of the fake LLM, so that queued and running tasks can be seen. */
const LLM_LATENCY_MS = 250;
/** Width of the summary when stdout is not a terminal (a file, a CI log): wide enough to read. */
const UNBOUNDED_WIDTH = 160;

/** The exit code of a demo ended by a signal: 128 + the signal's number, as a shell reports it. */
const EXIT_ON_SIGNAL: Partial<Record<NodeJS.Signals, number>> = {
  SIGHUP: 129,
  SIGINT: 130,
  SIGPIPE: 141,
  SIGTERM: 143,
};

const DEMO_ENV = {
  NATS_URL: COMMON_ENV.NATS_URL,
  DATABASE_URL: COMMON_ENV.DATABASE_URL,
  SLUICE_PREFIX: COMMON_ENV.SLUICE_PREFIX,
  /** The gateway's port; 0 (the default here) picks a free one. */
  SLUICE_GRPC_PORT: intVar(0, 0, 65_535),
};

const say = (line = '') => console.log(line);
const heading = (text: string) => say(`\n${paint('bold', `▸ ${text}`)}`);
const seconds = (from: number) => `${((performance.now() - from) / 1000).toFixed(2)}s`;

const { values: flags } = parseCommandLine(
  { options: { verbose: { type: 'boolean', default: false } } },
  'npm run demo [-- --verbose]',
);
const config = readConfig();
const interrupt = abortOnSignals();
process.exit(await runDemo(config));

/** The demo from start to clean stop; resolves with the exit code. */
async function runDemo(env: EnvConfig<typeof DEMO_ENV>): Promise<number> {
  const demoStart = performance.now();
  const runId = randomBytes(4).toString('hex');
  const tenantId = `demo-${runId}`;
  const problems: string[] = [];
  const cleanups: (() => Promise<unknown>)[] = [];
  let stack: Stack | undefined;
  let database: DatabaseHandle | undefined;
  let stopping = false;

  try {
    say(paint('bold', 'Sluice demo'));
    say(
      `NATS ${redactNatsUrl(env.NATS_URL)} · Postgres ${redactUrl(env.DATABASE_URL)} · prefix ${env.SLUICE_PREFIX}`,
    );

    // First of all: another stack on this database would take over some of the demo's steps.
    await migrateDatabase(env.DATABASE_URL);
    const db = openDatabase(env.DATABASE_URL, { max: 2, applicationName: DEMO_APPLICATION_NAME });
    database = db;
    cleanups.push(() => db.close());
    const busy = otherStackProblem(await otherServicesConnected(db));
    if (busy) throw new Error(busy);

    heading('the outside world: a fake OpenAI-compatible LLM and a fake web site, on loopback');
    const llmKey = `sk-demo-${randomBytes(8).toString('hex')}`;
    const llm = await startFakeLlmServer({ apiKey: llmKey, latencyMs: LLM_LATENCY_MS });
    cleanups.push(() => llm.stop());
    const web = await startFakeWebServer({ pages: { ...DEFAULT_PAGES, ...SAMPLE_PAGES } });
    cleanups.push(() => web.stop());
    say(`LLM ${llm.baseUrl} (answers after ${LLM_LATENCY_MS} ms) · web ${web.baseUrl}`);

    heading(`tenant ${tenantId}`);
    await createTenant(db.db, { id: tenantId, name: `Sluice demo ${runId}` });
    const apiKey = await createApiKey(db.db, { tenantId });
    say(`created, with a new API key ${apiKey.slice(0, 10)}… (Postgres keeps only its hash)`);

    // The services load the built-in task types (their environment names no others).
    const resources = await resourcesOfTaskModules(undefined);
    heading(`starting gateway, scheduler, governor and executors for ${resources.join(', ')}`);
    const stackStart = performance.now();
    stack = await startStack({
      resources,
      natsUrl: env.NATS_URL,
      databaseUrl: env.DATABASE_URL,
      prefix: env.SLUICE_PREFIX,
      llmBaseUrl: llm.baseUrl,
      llmApiKey: llmKey,
      grpcPort: env.SLUICE_GRPC_PORT,
      env: { SLUICE_EXECUTOR_SLOTS: String(DEMO_SLOTS) },
      echo: flags.verbose,
      // The real prefix is shared with `npm start`: its streams and buckets must outlive the demo.
      keepNatsResources: true,
    });
    say(`all up in ${seconds(stackStart)}; gRPC API at ${stack.grpcAddress}`);
    const client = createTaskClient({ address: stack.grpcAddress, apiKey, timeoutMs: 10_000 });
    cleanups.push(() => Promise.resolve(client.close()));

    // A service that dies mid-demo ends the demo at once instead of at the batch deadline.
    const serviceDied = abortWhenAServiceDies(stack, () => stopping, problems);
    const cutShort = AbortSignal.any([interrupt.signal, serviceDied]);

    if (!cutShort.aborted) {
      heading('a bad request');
      const problem = await showBadRequest(client, say);
      if (problem) problems.push(problem);
    }
    if (!cutShort.aborted) {
      heading(
        `1. a batch of research-brief tasks, least urgent first, ${DEMO_SLOTS} slots per executor`,
      );
      const batchStart = performance.now();
      const outcome = await runBatch({
        client,
        batch: demoBatch(runId),
        urlOf: (path) => web.url(path),
        say,
        signal: cutShort,
        deadlineMs: BATCH_DEADLINE_MS,
      });
      say(`\nbatch done in ${seconds(batchStart)}`);
      problems.push(...outcome.problems);

      if (!interrupt.signal.aborted) {
        heading('summary of the batch');
        const rows = summarize(outcome.results, await stepsOf(db, tenantId));
        for (const row of rows) {
          if (row.problem)
            problems.push(`${shortId(row.task.task_id)} ${row.label}: ${row.problem}`);
        }
        say(summaryTable(rows, process.stdout.columns || UNBOUNDED_WIDTH));
      }
    }
    if (!cutShort.aborted) {
      heading(
        '2. the other sample task types, together: a research report, an ingestion, an agent',
      );
      say(
        [
          'The report waits for a person. The demo answers as one would, with the sluice CLI: the',
          `real binary (node ${SLUICE_BIN}) with SLUICE_ADDRESS=${stack.grpcAddress} and the`,
          "tenant's SLUICE_API_KEY in its environment. Meanwhile the other two keep running.",
          '',
        ].join('\n'),
      );
      const samplesStart = performance.now();
      const outcome = await runSamples({
        client,
        samples: sampleTasks((path) => web.url(path)),
        cli: { address: stack.grpcAddress, apiKey },
        say,
        signal: cutShort,
        deadlineMs: SAMPLES_DEADLINE_MS,
      });
      say(`\nsample tasks done in ${seconds(samplesStart)}`);
      problems.push(...outcome.problems);

      if (!interrupt.signal.aborted) {
        heading('what the sample tasks produced');
        const report = sampleReport(
          await sampleSummaries(db, tenantId, outcome.results),
          process.stdout.columns || UNBOUNDED_WIDTH,
        );
        for (const line of report.lines) say(line);
        problems.push(...report.problems);
      }
    }
  } catch (error) {
    problems.push(error instanceof Error ? error.message : String(error));
  } finally {
    if (stack) {
      stopping = true;
      await stopStack(stack, problems);
    }
    if (database) await cancelLeftovers(database, tenantId, problems);
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  }

  const signal = interrupt.received();
  if (signal !== undefined) {
    console.error(`demo interrupted by ${signal} after ${seconds(demoStart)}`);
    return EXIT_ON_SIGNAL[signal] ?? 1;
  }
  if (problems.length > 0) {
    console.error(`\n${paint('red', 'demo failed:')}`);
    for (const problem of problems) console.error(`  - ${problem}`);
    return 1;
  }
  say(`\n${paint('green', '✓')} demo finished in ${seconds(demoStart)}`);
  return 0;
}

/**
 * An abort signal that fires when a service of the stack exits while `stopping()` is false; the
 * exit, with the end of the service's stderr, is added to `problems`.
 */
function abortWhenAServiceDies(
  stack: Stack,
  stopping: () => boolean,
  problems: string[],
): AbortSignal {
  const died = new AbortController();
  for (const service of stack.all) {
    void service.exited.then(({ code, signal }) => {
      if (stopping() || died.signal.aborted) return;
      const tail = service.stderr.slice(-5).join('\n    ');
      const what = `${service.options.name} exited (${signal ?? `code ${code}`}) during the demo`;
      problems.push(tail ? `${what}:\n    ${tail}` : what);
      died.abort();
    });
  }
  return died.signal;
}

/** Stops the services and says how they ended; an unclean stop is a problem unless interrupted. */
async function stopStack(stack: Stack, problems: string[]): Promise<void> {
  heading('stopping');
  const exits = await stack.stop();
  const unclean = Object.entries(exits).filter(([, code]) => code !== 0);
  if (unclean.length === 0) {
    say(`every service stopped cleanly (${Object.keys(exits).join(', ')})`);
  } else if (interrupt.received() === undefined) {
    // Interrupted, the services got the signal too, and a second one makes them exit at once.
    const list = unclean.map(([name, code]) => `${name} exit ${code}`).join(', ');
    problems.push(`not every service stopped cleanly: ${list}`);
  }
}

/** Cancels the tasks of the run that did not finish (see leftovers.ts) and says so. */
async function cancelLeftovers(
  database: DatabaseHandle,
  tenantId: string,
  problems: string[],
): Promise<void> {
  try {
    const left = await cancelUnfinished(database, tenantId, 'the demo stopped early');
    const count = left.cancelled + left.requested;
    if (count === 0) return;
    const settling = left.requested > 0 ? ` (${left.requested} settle when Sluice next runs)` : '';
    say(`cancelled the ${count} unfinished task(s) of ${tenantId}${settling}`);
  } catch (error) {
    problems.push(`cancelling the unfinished tasks: ${String(error)}`);
  }
}

/** The summary rows: each task's final state with its steps, judged against the plan. */
function summarize(
  results: readonly BatchResult[],
  steps: ReadonlyMap<string, StepSummary[]>,
): TaskSummary[] {
  return results.flatMap(({ submitted, task }): TaskSummary[] => {
    if (task === undefined) return [];
    const problems = [...submitted.problems, finalProblem(submitted, task)].filter(
      (p): p is string => p !== undefined,
    );
    return [
      {
        label: submitted.spec.label,
        task,
        steps: steps.get(task.task_id) ?? [],
        problem: problems.length > 0 ? problems.join('; ') : undefined,
      },
    ];
  });
}

/** The sample tasks that could be read, with their steps and rows in Postgres. */
async function sampleSummaries(
  database: DatabaseHandle,
  tenant: string,
  results: readonly SampleResult[],
): Promise<SampleSummary[]> {
  const steps = await stepsOf(database, tenant);
  const rows = await ingestedRowsOf(
    database,
    results.map((r) => r.taskId),
  );
  return results.flatMap(({ sample, taskId, task }): SampleSummary[] =>
    task === undefined
      ? []
      : [
          {
            sample,
            task,
            steps: steps.get(taskId) ?? [],
            facts: { storedRows: rows.get(taskId) ?? 0 },
          },
        ],
  );
}

/** The demo's configuration; a bad value ends the process with one line and exit code 2. */
function readConfig(): EnvConfig<typeof DEMO_ENV> {
  try {
    return loadEnvConfig(DEMO_ENV);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`demo: ${error.message}`);
    process.exit(2);
  }
}

/**
 * SIGINT, SIGTERM and SIGHUP (a closed terminal, which demo.mjs passes on like the others) end the
 * demo early but cleanly: the watches stop, unfinished tasks are cancelled and the services
 * stopped; a signal left to its default would kill the demo with its tasks unfinished in the
 * shared database. So does a closed stdout (`npm run demo | head`: EPIPE) or terminal (EIO, beside
 * the SIGHUP), which would otherwise crash the demo just as abruptly.
 */
function abortOnSignals(): { signal: AbortSignal; received(): NodeJS.Signals | undefined } {
  const controller = new AbortController();
  let received: NodeJS.Signals | undefined;
  const stop = (name: NodeJS.Signals) => {
    if (received !== undefined) return;
    received = name;
    console.error(`\n${name}: stopping the demo…`);
    controller.abort();
  };
  for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(name, () => stop(name));
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') stop('SIGPIPE');
      else if (error.code === 'EIO') stop('SIGHUP');
      else throw error;
    });
  }
  return { signal: controller.signal, received: () => received };
}

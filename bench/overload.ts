/**
 * Overload benchmark (issue 5, done-when 6): the scenario of test/e2e/overload.test.ts, timed. A
 * fake LLM with a hidden concurrency limit; P0 tasks one at a time on the idle stack; then a P3
 * flood above the hidden capacity beside a steady P0 stream. It prints and writes
 * (docs/benchmarks/overload.md) P0 wait p50/p95/p99 idle and under load, goodput as a share of the
 * hidden capacity, the 429 share, rejected creates, and tasks lost (must be 0), with the machine.
 *
 * Run: `npm run bench:overload -- --help` for the flags. Not part of `npm test`. The whole stack
 * runs as separate processes (test/support/e2e-stack.ts) on a fresh database and NATS prefix,
 * both removed at the end, also on failure or Ctrl-C.
 *
 * Imports go by path: bench/ is not a workspace package (yet; issue 7's suite will make it one).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  decodeDecision,
  type GovernorDecision,
} from '../packages/bus/src/index.js';
import { natsUrl } from '../packages/bus/src/testing/index.js';
import { isServiceError } from '../packages/sdk/src/client/index.js';
import { decodeStatusDetails } from '../services/gateway/src/grpc/status-details.js';
import { startE2eStack, type E2eStack } from '../test/support/e2e-stack.js';
import {
  startFakeLlmServer,
  type FakeLlmServer,
  type FakeLlmStats,
} from '../test/support/fake-llm-server.js';
import { LoadSends, type Priority } from './overload/load-sends.js';
import { loadNow, machineFacts } from './overload/machine.js';
import { hiddenCapacity, parseOverloadOptions, type OverloadOptions } from './overload/options.js';
import {
  benchThresholds,
  goodput,
  keptNotes,
  markdown,
  passed,
  summaryLines,
  type Integrity,
  type LoadWindow,
  type OverloadResults,
  type WaitSplit,
} from './overload/report.js';
import { percentiles, share } from './overload/stats.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TASK_MODULE = path.join(REPO_ROOT, 'test', 'e2e', 'backpressure-task-types.ts');
const API_KEY = 'sk-bench-overload';
const RESOURCE_EXHAUSTED = 8;
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;
/** CreateTask calls in flight at once: the flood is paced, not a thundering herd. */
const MAX_CREATES_IN_FLIGHT = 32;
const WARM_UP_TASKS = 3;
const SAMPLE_MS = 250;
const POLL_MS = 1_000;

/**
 * Aborted when the run ends early (failure or signal): the flood and the stream stop sending, so
 * that no create races the teardown of the client and the stack.
 */
const shutdown = new AbortController();
type Nats = Awaited<ReturnType<typeof connectNats>>;

function say(line = ''): void {
  process.stdout.write(`${line}\n`);
}

/** One line of progress: rewritten in place on a terminal, every few seconds otherwise. */
class Progress {
  private last = 0;
  private shown = false;
  update(text: string): void {
    if (shutdown.signal.aborted) return;
    if (process.stdout.isTTY) {
      process.stdout.write(`\r\x1b[2K${text}`);
      this.shown = true;
    } else if (performance.now() - this.last >= 5_000) {
      this.last = performance.now();
      say(text);
    }
  }
  done(): void {
    if (this.shown) process.stdout.write('\n');
    this.shown = false;
  }
}

/** A counting semaphore for the creates in flight. */
class Slots {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(size: number) {
    this.free = size;
  }
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

/** The retry delay of a RESOURCE_EXHAUSTED answer (`google.rpc.RetryInfo`), in ms. */
function retryDelayOf(error: unknown): number | undefined {
  if (!isServiceError(error) || Number(error.code) !== RESOURCE_EXHAUSTED) return undefined;
  const bytes = error.metadata?.get('grpc-status-details-bin')[0];
  if (!(bytes instanceof Buffer)) return undefined;
  return decodeStatusDetails(bytes).retryDelayMs;
}

function isTransient(error: unknown): boolean {
  if (!isServiceError(error)) return false;
  const code = Number(error.code);
  return code === UNAVAILABLE || code === DEADLINE_EXCEEDED;
}

/** What the clients did: creates, rejections and the task id of every key. */
class Submitter {
  readonly ids = new Map<string, string>();
  acceptedP3 = 0;
  rejectedP0 = 0;
  rejectedP3 = 0;
  /** Keys answered RESOURCE_EXHAUSTED at least once. */
  readonly rejectedKeys = new Set<string>();
  createErrors = 0;
  private readonly slots = new Slots(MAX_CREATES_IN_FLIGHT);

  constructor(private readonly e2e: E2eStack) {}

  /**
   * Creates the task of `key`; a RESOURCE_EXHAUSTED answer is retried after its RetryInfo delay,
   * UNAVAILABLE or a deadline after half a second, always with the same key.
   */
  async submit(key: string, priority: Priority): Promise<string> {
    for (;;) {
      shutdown.signal.throwIfAborted();
      try {
        const { task } = await this.slots.run(() =>
          this.e2e.client.createTask({
            type: 'bp-llm',
            priority,
            input: { label: key },
            idempotencyKey: key,
          }),
        );
        this.ids.set(key, task.task_id);
        if (priority === 'PRIORITY_P3') this.acceptedP3 += 1;
        return task.task_id;
      } catch (error) {
        const delay = retryDelayOf(error);
        if (delay !== undefined) {
          if (priority === 'PRIORITY_P0') this.rejectedP0 += 1;
          else this.rejectedP3 += 1;
          this.rejectedKeys.add(key);
          await sleep(Math.max(delay, 50));
        } else if (isTransient(error)) {
          this.createErrors += 1;
          await sleep(500);
        } else {
          throw error;
        }
      }
    }
  }
}

/** Waits until the task is final; returns its status. */
async function waitFinal(e2e: E2eStack, id: string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await e2e.handle.sql<{ status: string }[]>`
      select status from tasks where id = ${id}`;
    const status = row?.status;
    if (status === 'succeeded' || status === 'failed_terminal' || status === 'cancelled') {
      return status;
    }
    if (Date.now() > deadline)
      throw new Error(`task ${id} is still ${status} after ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** Wait (created → started) and total (created → finished) of the tasks of some keys, in ms. */
async function timings(
  e2e: E2eStack,
  keys: readonly string[],
): Promise<{ wait: number[]; total: number[] }> {
  const rows = await e2e.handle.sql<{ wait_ms: number | null; total_ms: number | null }[]>`
    select extract(epoch from (started_at - created_at)) * 1000 as wait_ms,
      extract(epoch from (finished_at - created_at)) * 1000 as total_ms
    from tasks where idempotency_key = any(${keys as string[]})`;
  return {
    wait: rows.flatMap((r) => (r.wait_ms === null ? [] : [Number(r.wait_ms)])),
    total: rows.flatMap((r) => (r.total_ms === null ? [] : [Number(r.total_ms)])),
  };
}

/** Unfinished tasks by priority (queued, running, …: anything not final). */
async function unfinished(e2e: E2eStack): Promise<{ p0: number; p3: number; p3Done: number }> {
  const rows = await e2e.handle.sql<{ priority: number; open: number; done: number }[]>`
    select priority,
      count(*) filter (where status not in ('succeeded', 'failed_terminal', 'cancelled'))::int as open,
      count(*) filter (where status in ('succeeded', 'failed_terminal', 'cancelled'))::int as done
    from tasks group by priority`;
  const of = (p: number) => rows.find((r) => r.priority === p);
  return { p0: of(0)?.open ?? 0, p3: of(3)?.open ?? 0, p3Done: of(3)?.done ?? 0 };
}

async function idlePhase(
  e2e: E2eStack,
  submitter: Submitter,
  options: OverloadOptions,
  progress: Progress,
): Promise<string[]> {
  for (let i = 0; i < WARM_UP_TASKS; i++) {
    await waitFinal(e2e, await submitter.submit(`warm-p0-${i}`, 'PRIORITY_P0'), 60_000);
  }
  const keys: string[] = [];
  for (let i = 0; i < options.idleP0; i++) {
    const key = `idle-p0-${i}`;
    keys.push(key);
    await waitFinal(e2e, await submitter.submit(key, 'PRIORITY_P0'), 60_000);
    progress.update(`idle: ${i + 1}/${options.idleP0} P0 tasks`);
  }
  progress.done();
  return keys;
}

interface Sample {
  readonly at: number;
  readonly llm: FakeLlmStats;
}

interface LoadOutcome {
  readonly p0Keys: string[];
  readonly p3Keys: string[];
  readonly window: LoadWindow;
}

async function loadPhase(
  e2e: E2eStack,
  llm: FakeLlmServer,
  submitter: Submitter,
  decisions: Array<{ at: number; decision: GovernorDecision }>,
  options: OverloadOptions,
  progress: Progress,
): Promise<LoadOutcome> {
  const started = performance.now();
  const deadline = started + options.timeoutSeconds * 1_000;
  const samples: Sample[] = [{ at: started, llm: llm.stats() }];
  const sampler = setInterval(
    () => samples.push({ at: performance.now(), llm: llm.stats() }),
    SAMPLE_MS,
  );
  let loadOver = false;

  const sends = new LoadSends({
    p3: options.p3,
    floodSeconds: options.floodSeconds,
    p0PerSecond: options.p0PerSecond,
    started,
    submit: (key, priority) => submitter.submit(key, priority),
    signal: shutdown.signal,
  });
  const { p0Keys, p3Keys } = sends;
  try {
    let ended = Number.NaN;
    while (!loadOver) {
      await sleep(POLL_MS);
      if (sends.failure !== undefined) {
        const { key, error } = sends.failure;
        throw new Error(`the create of ${key} failed: ${String(error)}`, { cause: error });
      }
      if (performance.now() > deadline) {
        throw new Error(`the load did not drain within ${options.timeoutSeconds} s`);
      }
      const open = await unfinished(e2e);
      const s = llm.stats();
      const level = decisions.at(-1)?.decision.level ?? '–';
      progress.update(
        `load ${((performance.now() - started) / 1_000).toFixed(0)} s: P3 accepted ` +
          `${submitter.acceptedP3}/${options.p3}, ` +
          `finished ${open.p3Done}; rejected ${submitter.rejectedP3}; P0 sent ${p0Keys.length}; ` +
          `LLM ${s.calls} calls, 429 ${share(s.rateLimited, s.calls)}; level ${level}`,
      );
      if (sends.floodSeconds !== undefined && open.p3 === 0) {
        loadOver = true;
        sends.stop();
        ended = performance.now();
      }
    }
    await sends.settled();
    progress.done();
    samples.push({ at: ended, llm: llm.stats() });
    clearInterval(sampler);

    const first = samples[0]!;
    const last = samples.at(-1)!;
    const seconds = (ended - started) / 1_000;
    const quarter = samples.find((s) => s.at >= started + (ended - started) / 4) ?? last;
    const inWindow = decisions
      .filter((d) => d.at >= started && d.at <= ended)
      .map((d) => d.decision);
    return {
      p0Keys,
      p3Keys,
      window: {
        seconds,
        floodSeconds: sends.floodSeconds ?? Number.NaN,
        llmCalls: last.llm.calls - first.llm.calls,
        llm429: last.llm.rateLimited - first.llm.rateLimited,
        llmSucceeded: last.llm.succeeded - first.llm.succeeded,
        settledCalls: last.llm.calls - quarter.llm.calls,
        settled429: last.llm.rateLimited - quarter.llm.rateLimited,
        maxInFlight: last.llm.maxInFlight,
        decisions: inWindow.length,
        rejectP3: inWindow.filter((d) => d.reject.includes(3)).length,
        holdP3: inWindow.filter((d) => d.holds.includes(3)).length,
        throttleP3: inWindow.filter((d) => (d.throttle ?? []).includes(3)).length,
        touchedP0: inWindow.filter((d) => d.holds.includes(0) || d.reject.includes(0)).length,
        reasons: countReasons(inWindow),
        llmLimit: limitRange(inWindow),
      },
    };
  } finally {
    clearInterval(sampler);
    sends.stop();
  }
}

/** The decisions' reasons with their counts, numbers blanked so that alike reasons add up. */
function countReasons(decisions: readonly GovernorDecision[]): Array<[string, number]> {
  const counts = new Map<string, number>();
  for (const d of decisions) {
    for (const reason of new Set(d.reasons.map((r) => r.replace(/\d+(\.\d+)?/g, '#')))) {
      counts.set(reason, (counts.get(reason) ?? 0) + 1);
    }
  }
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, 8);
}

function limitRange(decisions: readonly GovernorDecision[]): LoadWindow['llmLimit'] {
  const limits = decisions.flatMap((d) => (d.limits?.llm === undefined ? [] : [d.limits.llm]));
  if (limits.length === 0) return null;
  return { min: Math.min(...limits), max: Math.max(...limits), last: limits.at(-1) ?? Number.NaN };
}

/** Created → dispatched → started of the first-attempt steps of some keys' tasks, in ms. */
async function waitSplit(e2e: E2eStack, keys: readonly string[]): Promise<WaitSplit> {
  const rows = await e2e.handle.sql<{ to_dispatch: number; to_start: number }[]>`
    select extract(epoch from (s.dispatched_at - t.created_at)) * 1000 as to_dispatch,
      extract(epoch from (s.started_at - s.dispatched_at)) * 1000 as to_start
    from tasks t join task_steps s on s.task_id = t.id and s.seq = 1
    where t.idempotency_key = any(${keys as string[]}) and s.attempts = 1 and s.dispatch_count = 1
      and s.started_at is not null`;
  return {
    toDispatch: percentiles(rows.map((r) => Number(r.to_dispatch))),
    toStart: percentiles(rows.map((r) => Number(r.to_start))),
  };
}

/**
 * Drops the migrated template this process built for the stack's database (outside `npm test`,
 * `migratedTemplate` builds one per process and leaves it for a later run to clean up). A run's
 * shared template (SLUICE_TEST_RUN_ID set) is the run's, not ours.
 */
async function dropOwnTemplate(e2e: E2eStack): Promise<void> {
  if (process.env.SLUICE_TEST_RUN_ID) return;
  const rows = await e2e.handle.sql<{ name: string }[]>`
    select datname as name from pg_database
    where datname like 'sluice\_tpl\_%'
      and shobj_description(oid, 'pg_database') like '{%'
      and (shobj_description(oid, 'pg_database')::jsonb ->> 'pid') = ${String(process.pid)}
      and (shobj_description(oid, 'pg_database')::jsonb ->> 'host') = ${hostname()}`;
  for (const { name } of rows) {
    if (/^[a-z0-9_]+$/.test(name)) {
      await e2e.handle.sql.unsafe(`drop database if exists "${name}" with (force)`);
    }
  }
}

/** Every key one task, every task succeeded: counted in Postgres. */
async function integrity(e2e: E2eStack, keys: readonly string[]): Promise<Integrity> {
  const [row] = await e2e.handle.sql<
    { tasks: number; distinct_keys: number; succeeded: number; failed: number }[]
  >`
    select count(*)::int as tasks, count(distinct idempotency_key)::int as distinct_keys,
      count(*) filter (where status = 'succeeded' and idempotency_key = any(${keys as string[]}))::int
        as succeeded,
      count(*) filter (where status in ('failed_terminal', 'cancelled'))::int as failed
    from tasks`;
  const tasks = row?.tasks ?? 0;
  const succeeded = row?.succeeded ?? 0;
  return {
    keys: keys.length,
    succeeded,
    failed: row?.failed ?? 0,
    lost: keys.length - succeeded,
    tasksInDb: tasks,
    duplicates: tasks - (row?.distinct_keys ?? 0),
  };
}

async function run(
  options: OverloadOptions,
  cleanups: Array<() => Promise<void>>,
): Promise<OverloadResults> {
  const progress = new Progress();
  const startedAt = new Date();
  const runStarted = performance.now();
  say(
    `overload benchmark: hidden limit ${options.llmConcurrency} calls × ${options.llmLatencyMs} ms ` +
      `(${hiddenCapacity(options).toFixed(1)} calls/s); idle ${options.idleP0} P0; flood ${options.p3} P3 ` +
      `over ${options.floodSeconds} s + ${options.p0PerSecond} P0/s`,
  );
  const llm = await startFakeLlmServer({
    apiKey: API_KEY,
    latencyMs: options.llmLatencyMs,
    hiddenLimit: { maxConcurrent: options.llmConcurrency, retryAfterMs: options.llmRetryAfterMs },
  });
  cleanups.push(() => llm.stop());
  say('starting the stack …');
  const e2e = await startE2eStack({
    label: 'bench-overload',
    maxConnections: 4,
    resources: ['llm'],
    llmBaseUrl: llm.baseUrl,
    llmApiKey: API_KEY,
    echo: options.echo,
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_GOVERNOR_THRESHOLDS: JSON.stringify(benchThresholds(options)),
    },
  });
  cleanups.push(async () => {
    await e2e.stop();
  });
  cleanups.push(() => dropOwnTemplate(e2e));
  const nc: Nats = await connectNats({ url: natsUrl(), name: 'bench-overload' });
  cleanups.push(() => closeNats(nc));
  const decisions: Array<{ at: number; decision: GovernorDecision }> = [];
  nc.subscribe(createBusCatalog(e2e.prefix).subjects.governorDecisions, {
    callback: (error, message) => {
      if (!error) decisions.push({ at: performance.now(), decision: decodeDecision(message.data) });
    },
  });
  const [pg] = await e2e.handle.sql<{ version: string }[]>`select version()`;
  const machine = machineFacts(nc.info?.version ?? 'unknown', pg?.version ?? 'unknown');
  say(`database ${e2e.database.name}, prefix ${e2e.prefix}`);

  const submitter = new Submitter(e2e);
  const idleKeys = await idlePhase(e2e, submitter, options, progress);
  const idle = await timings(e2e, idleKeys);
  say(`idle: P0 wait p50 ${percentiles(idle.wait).p50.toFixed(0)} ms`);

  const load = await loadPhase(e2e, llm, submitter, decisions, options, progress);
  for (const key of load.p0Keys) {
    const id = submitter.ids.get(key);
    if (id) await waitFinal(e2e, id, 120_000);
  }
  const loaded = await timings(e2e, load.p0Keys);
  const p3 = await timings(e2e, load.p3Keys);
  const keys = [...submitter.ids.keys()];
  machine.loadAtEnd = loadNow();
  return {
    options,
    startedAt: startedAt.toISOString(),
    runSeconds: (performance.now() - runStarted) / 1_000,
    machine,
    idleWait: percentiles(idle.wait),
    idleTotal: percentiles(idle.total),
    loadWait: percentiles(loaded.wait),
    loadTotal: percentiles(loaded.total),
    p3Wait: percentiles(p3.wait),
    loadSplit: await waitSplit(e2e, load.p0Keys),
    window: load.window,
    rejectedP3: submitter.rejectedP3,
    rejectedP0: submitter.rejectedP0,
    rejectedKeys: submitter.rejectedKeys.size,
    createErrors: submitter.createErrors,
    integrity: await integrity(e2e, keys),
  };
}

async function main(): Promise<number> {
  let options: OverloadOptions;
  try {
    options = parseOverloadOptions(process.argv.slice(2), REPO_ROOT);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 2;
  }
  // Stopped in reverse order of starting: NATS connection, stack (and database), fake LLM.
  const cleanups: Array<() => Promise<void>> = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      shutdown.abort(new Error('the benchmark is stopping'));
      // Creates and polls still in flight fail as the client and the database go away; nobody
      // waits for them any more, and they must not crash the process before the cleanup is done.
      process.on('unhandledRejection', () => undefined);
      for (const step of cleanups.reverse()) {
        try {
          await step();
        } catch (error) {
          process.stderr.write(`cleanup: ${String(error)}\n`);
        }
      }
    })());
  const interrupt = (signal: NodeJS.Signals) => {
    process.stderr.write(`\n${signal}: stopping the stack and dropping the database …\n`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    const results = await run(options, cleanups);
    say();
    for (const line of summaryLines(results)) say(line);
    if (options.out !== '') {
      await mkdir(path.dirname(options.out), { recursive: true });
      const previous = await readFile(options.out, 'utf8').catch(() => '');
      await writeFile(options.out, markdown(results, keptNotes(previous)));
      say(`written to ${path.relative(process.cwd(), options.out) || options.out}`);
    }
    const g = goodput(results);
    if (!(g.share > 0)) say('warning: no goodput measured');
    return passed(results) ? 0 : 1;
  } finally {
    await cleanup();
  }
}

process.exitCode = await main();

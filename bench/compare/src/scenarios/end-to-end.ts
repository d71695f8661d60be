/**
 * End-to-end (issue 7, workload 2): with the workers running from the start, jobs arrive one at a
 * time at a fixed rate — a share (`--load`, default 50 %; the full set 25, 50 and 90 %) of the
 * system's drain rate (rates.ts) — and each is timed from its scheduled send time to its handler's
 * start and to its completion (where the system lets an observer see completions), p50/p95/p99 of
 * all samples. The enqueue call's own latency (Sluice: CreateTask) is reported too, the rate the
 * jobs started at (below the arrivals: what the system got through at that load; pace.ts) with
 * the wait of each tenth of them (how the lateness moved through the run), and the CPU per job of
 * each of the system's processes and of the machine at that rate, between a quarter and three
 * quarters of the starts (cpu-per-job.ts).
 *
 * A few warm-up jobs go first, one at a time, and are left out of the figures: a worker's first
 * job pays its start-up (a process for Sluice), which drain reports.
 */
import { randomBytes } from 'node:crypto';
import { CpuPerJobWindow } from '../cpu-per-job.js';
import { PostgresWorkWindow } from '../postgres-work.js';
import { WakeUpWindow } from '../wake-ups.js';
import { Ledger } from '../ledger.js';
import { epochNow } from '../latency.js';
import { paceOf } from '../pace.js';
import { formatNumber } from '../report-format.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { CompletionWatch, Job, QueueSystem } from '../system.js';
import { SystemProcesses } from '../system-processes.js';
import {
  COMPLETION_TIMEOUT_MS,
  handlingTimeoutMs,
  pushLatency,
  pushSendFigures,
  scheduledJobs,
  sendOpenLoop,
  sinceScheduled,
  skipBatched,
  StartLog,
} from './arrivals.js';
import { awaitLedger, runFramed, type RunFrame } from './framed-run.js';

/** Loads the default set runs, and the full set's. */
export const DEFAULT_LOADS: readonly number[] = [50];
export const FULL_LOADS: readonly number[] = [25, 50, 90];

/** Jobs sent (one after the other) before the measured ones. */
const WARM_UP_JOBS = 2;
const WARM_UP_TIMEOUT_MS = 60_000;
/** Between the warm-up and the first measured send, so that the first sends find idle workers. */
const SETTLE_MS = 500;
/** First send time this long after the arrivals are scheduled (room for the first timer tick). */
const LEAD_MS = 20;

export interface ArrivalRun {
  readonly scenario: string;
  readonly setting?: string;
  readonly system: QueueSystem;
  readonly context: ScenarioContext;
  /** Measured jobs. */
  readonly count: number;
  readonly intervalMs: number;
  /** Notes on where the pace came from. */
  readonly notes: readonly string[];
}

/**
 * Runs open-loop arrivals of `count` jobs every `intervalMs` on running workers and reports the
 * latencies (end-to-end and idle pickup differ only in the pace).
 */
export async function runArrivals(run: ArrivalRun): Promise<ScenarioResult> {
  const { system, context, count, intervalMs } = run;
  const token = randomBytes(4).toString('hex');
  const warmUp: Job[] = Array.from({ length: WARM_UP_JOBS }, (_, i) => ({ id: `${token}-w${i}` }));
  // Send times are fixed once the workers run; the ids are needed now, for the ledger.
  const ids = Array.from({ length: count }, (_, i) => `${token}-m${i}`);
  const ledger = new Ledger([...warmUp.map((j) => j.id), ...ids]);
  const starts = new StartLog(ledger);
  return runFramed({
    scenario: run.scenario,
    setting: run.setting,
    system,
    context,
    ledger,
    body: async (frame) => {
      frame.notes.push(
        ...run.notes,
        `${count} measured jobs after ${WARM_UP_JOBS} warm-up jobs (in the ledger, not in the figures)`,
      );
      const watch = await system.watchCompletions?.();
      const processes = new SystemProcesses(system);
      try {
        await system.startWorkers({ handler: starts.handler, concurrency: context.concurrency });
        context.progress.update(`${frame.label}: warming up`);
        for (const job of warmUp) {
          await system.enqueue([job]);
          await starts.waitStarted([job.id], WARM_UP_TIMEOUT_MS);
        }
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        // Before the schedule is fixed: finding them may take a query.
        await processes.startFinding();
        // The server's work over the same starts, where the system keeps its jobs in Postgres.
        const read = system.postgresWork?.bind(system);
        const work = read === undefined ? undefined : new PostgresWorkWindow(read);
        const wakeUps = new WakeUpWindow(processes);
        const cpu = new CpuPerJobWindow(processes, count, [
          wakeUps,
          ...(work === undefined ? [] : [work]),
        ]);
        const jobs = scheduledJobs({
          run: token,
          prefix: 'm',
          count,
          firstAt: epochNow() + LEAD_MS,
          intervalMs,
        });
        await measure(frame, { system, context, jobs, intervalMs, ledger, starts, watch, cpu });
        frame.figures.push(...cpu.figures(), ...wakeUps.figures());
        frame.notes.push(cpu.note());
        const wakeUpNote = wakeUps.note();
        if (wakeUpNote !== undefined) frame.notes.push(wakeUpNote);
        if (work !== undefined) {
          const { figures, note } = await work.result();
          frame.figures.push(...figures);
          if (note !== undefined) frame.notes.push(note);
        }
        if (processes.refreshError !== undefined) {
          frame.notes.push(`processes() failed: ${processes.refreshError}`);
        }
      } finally {
        processes.stop();
        await watch?.stop();
      }
    },
  });
}

async function measure(
  frame: RunFrame,
  run: {
    readonly system: QueueSystem;
    readonly context: ScenarioContext;
    readonly jobs: readonly Job[];
    readonly intervalMs: number;
    readonly ledger: Ledger;
    readonly starts: StartLog;
    readonly watch: CompletionWatch | undefined;
    readonly cpu: CpuPerJobWindow;
  },
): Promise<void> {
  const { jobs, ledger, starts, context } = run;
  let sent = 0;
  // The warm-up jobs are in the ledger too, all started before the first measured send.
  const measuredStarted = () => ledger.handled - WARM_UP_JOBS;
  const ticker = setInterval(() => {
    run.cpu.observe(measuredStarted());
    context.progress.update(
      `${frame.label}: sent ${sent}/${jobs.length}, started ${ledger.handled}`,
    );
  }, 250);
  try {
    const times = await sendOpenLoop(run.system, jobs, () => {
      sent += 1;
    });
    await awaitLedger(ledger, frame, handlingTimeoutMs(jobs.length));
    // A run shorter than two ticks closes its window here, with every start in it.
    run.cpu.observe(measuredStarted());
    frame.figures.push(
      { key: 'arrival_rate', label: 'arrivals', value: 1_000 / run.intervalMs, unit: 'jobs/s' },
      { key: 'measured_jobs', label: 'measured', value: jobs.length, unit: 'jobs' },
    );
    pushLatency(frame.figures, 'start', 'send → start', sinceScheduled(jobs, starts.startedAt));
    pushPace(frame, jobs, starts.startedAt);
    if (run.watch) {
      const done = await run.watch.completions(
        jobs.map((j) => j.id),
        COMPLETION_TIMEOUT_MS,
      );
      pushLatency(frame.figures, 'complete', 'send → completed', sinceScheduled(jobs, done));
      if (done.size < jobs.length) {
        frame.notes.push(
          `completion seen for ${done.size} of ${jobs.length} jobs within ${COMPLETION_TIMEOUT_MS / 1_000} s; its figures are of those`,
        );
      }
    } else {
      frame.notes.push('offers no way to observe completions here: no completion figures');
    }
    pushSendFigures(frame, times);
  } finally {
    clearInterval(ticker);
  }
}

/**
 * The rate the jobs started at against the rate they arrived at (pace.ts): below the arrivals, the
 * system fell behind and got through that many a second at this load. The note adds the wait of
 * each tenth, which says whether a queue grew, stayed or was worked off.
 */
function pushPace(
  frame: RunFrame,
  jobs: readonly Job[],
  startedAt: ReadonlyMap<string, number>,
): void {
  const pace = paceOf(
    jobs.flatMap((job) =>
      job.scheduledAt === undefined
        ? []
        : [{ scheduledAt: job.scheduledAt, startedAt: startedAt.get(job.id) }],
    ),
  );
  if (pace === undefined) {
    frame.notes.push('too few jobs for a start rate');
    return;
  }
  frame.figures.push({
    key: 'start_rate',
    label: 'started',
    value: pace.startRate,
    unit: 'jobs/s',
  });
  frame.notes.push(
    `jobs started at ${pace.startRate.toFixed(1)} a second while they arrived at ${pace.arrivalRate.toFixed(1)} (medians of tenths in send order, pace.ts); ` +
      `send → start p50 of each tenth: ${pace.waitByTenth.map((ms) => formatNumber(ms, 1)).join(', ')} ms`,
  );
}

export const endToEnd: Scenario = {
  name: 'end-to-end',
  description:
    'jobs arriving one at a time at a share of the drain rate on running workers; latency to start and completion',
  defaultCount: 3_000,
  smokeCount: 60,
  perLoad: true,
  skip: skipBatched,

  async run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    const load = context.loadPercent ?? DEFAULT_LOADS[0] ?? 50;
    const drain = context.drainRate;
    if (drain === undefined) {
      return {
        scenario: 'end-to-end',
        setting: `load ${load} %`,
        system: { name: system.name, durability: system.durability, batched: system.batched },
        count: 0,
        concurrency: context.concurrency,
        versions: {},
        figures: [],
        failure: 'no drain rate known: run drain first in the same command, or give --rate-for',
        notes: [],
      };
    }
    const rate = (drain.jobsPerSecond * load) / 100;
    return runArrivals({
      scenario: 'end-to-end',
      setting: `load ${load} %`,
      system,
      context,
      count: context.count,
      intervalMs: 1_000 / rate,
      notes: [
        `${load} % of a drain rate of ${Math.round(drain.jobsPerSecond)} jobs/s (${drain.source}): ${rate.toFixed(1)} jobs/s`,
      ],
    });
  },
};

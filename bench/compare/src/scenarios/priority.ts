/**
 * Priority isolation (issue 7, workload 3): N low-priority jobs (default 10,000) are backlogged
 * while no worker runs; the workers start, and from the first handler start high-priority jobs
 * arrive one at a time at a steady rate (10 % of the system's drain processing rate, rates.ts),
 * open loop. Their wait — scheduled send → handler start — is compared with the same system's idle
 * wait:
 * once the backlog is drained, the same number of high-priority jobs (at most 100) is sent at the
 * same rate with nothing queued. The figure is p95 in backlog / p95 idle (target for Sluice ≤ 2).
 *
 * The backlog's waits are also given without the high jobs sent in its first second ("after its
 * first second"): the guards of a system meet P0 work at its onset with a pipeline full of low
 * jobs, and that second can hold most of the p95 (session 15); the two figures tell a slow onset
 * from a slow steady state. The target is on the whole.
 *
 * The idle phase runs after the backlog rather than before: a system's workers cannot be stopped
 * and restarted through the harness's interface, and the backlog must wait for workers that are
 * not running yet. High-priority jobs number 5 % of the backlog (at least 10), so at 10 % of the
 * processing rate they arrive during its first half; "low jobs left at the last high send" shows
 * whether they all met a backlog. The raw floors have no priorities and are skipped.
 *
 * Each phase also gives how busy the whole machine was while its high jobs arrived (all cores,
 * machine-busy.ts): a wait behind a saturated machine reads differently from one a system imposes.
 */
import { randomBytes } from 'node:crypto';
import { Ledger } from '../ledger.js';
import { MachineBusyWindow } from '../machine-busy.js';
import { epochNow, type LatencySummary } from '../latency.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { Job, QueueSystem, SystemInfo } from '../system.js';
import {
  handlingTimeoutMs,
  pushLatency,
  pushSendFigures,
  scheduledJobs,
  sendOpenLoop,
  sinceScheduled,
  skipBatched,
  StartLog,
} from './arrivals.js';
import { enqueueInChunks } from './backlog.js';
import { awaitLedger, runFramed, type RunFrame } from './framed-run.js';

/** High-priority arrivals as a percentage of the drain rate. */
export const HIGH_LOAD_PERCENT = 10;
/** High-priority jobs of the backlog phase, as a share of the backlog (and at least {@link MIN_HIGH}). */
const HIGH_SHARE = 0.05;
const MIN_HIGH = 10;
/**
 * High-priority jobs of the idle phase, at most: as many as the backlog's (500 in the default
 * set), so the two p95s are read from samples of one size. With 100, the idle p95 rested on five
 * jobs, and the ratio moved with it from run to run more than with anything a system did
 * (session 23: idle p95 26–76 ms in six runs of one commit).
 */
const MAX_IDLE_HIGH = 500;
/** The backlog's high jobs sent this long after its first are also reported apart. */
const ONSET_MS = 1_000;
/** After the backlog drained, before the idle phase: lets pollers and batches go quiet. */
const SETTLE_MS = 1_000;
const LEAD_MS = 20;
/** How long the workers may take to start their first job (Sluice starts a process). */
const FIRST_START_TIMEOUT_MS = 60_000;
/** Systems without priorities. */
const NO_PRIORITIES = new Set(['raw-jetstream', 'raw-postgres']);

export const priority: Scenario = {
  name: 'priority',
  description:
    'high-priority arrivals behind a backlog of low-priority jobs, against the same arrivals on an idle system',
  defaultCount: 10_000,
  smokeCount: 60,

  skip(system: SystemInfo): string | undefined {
    if (NO_PRIORITIES.has(system.name)) return 'has no priorities (a raw floor)';
    return skipBatched(system);
  },

  async run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    const token = randomBytes(4).toString('hex');
    const backlog: Job[] = Array.from({ length: context.count }, (_, i) => ({
      id: `${token}-low${i}`,
      priority: 'low',
    }));
    const highCount = Math.max(MIN_HIGH, Math.ceil(context.count * HIGH_SHARE));
    const idleCount = Math.min(MAX_IDLE_HIGH, highCount);
    const highIds = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => `${token}-${prefix}${i}`);
    const ledger = new Ledger([
      ...backlog.map((j) => j.id),
      ...highIds('hb', highCount),
      ...highIds('hi', idleCount),
    ]);
    const starts = new StartLog(ledger);
    const drain = context.drainRate;
    return runFramed({
      scenario: 'priority',
      system,
      context,
      ledger,
      body: async (frame) => {
        if (drain === undefined) {
          throw new Error(
            'no drain rate known: run drain first in the same command, or give --rate-for',
          );
        }
        // Paced by the processing rate: the high jobs have to arrive while the backlog lasts.
        const rate = (drain.processingPerSecond * HIGH_LOAD_PERCENT) / 100;
        const intervalMs = 1_000 / rate;
        frame.notes.push(
          `high-priority arrivals at ${HIGH_LOAD_PERCENT} % of a processing rate of ${Math.round(drain.processingPerSecond)} jobs/s (${drain.source}): ${rate.toFixed(1)} jobs/s; ` +
            `${context.count} low backlogged, ${highCount} high during the backlog, ${idleCount} high idle`,
        );
        frame.figures.push(
          { key: 'high_rate', label: 'high arrivals', value: rate, unit: 'jobs/s' },
          { key: 'low_backlog', label: 'low backlog', value: context.count, unit: 'jobs' },
        );

        const backlogProgress = (backlogged: number) =>
          context.progress.update(
            `${frame.label}: backlogged ${backlogged}/${context.count} low-priority jobs`,
          );
        backlogProgress(0);
        await enqueueInChunks(backlog, (slice) => system.enqueue(slice), backlogProgress);
        if (ledger.handled > 0) {
          frame.notes.push(`${ledger.handled} jobs were handled before the workers were started`);
        }
        const backlogIds = new Set(backlog.map((j) => j.id));
        let lowStarted = 0;
        starts.onStart((id) => {
          if (backlogIds.has(id)) lowStarted += 1;
        });
        const firstStart = new Promise<void>((resolve) => {
          const stop = starts.onStart(() => {
            stop();
            resolve();
          });
        });
        await system.startWorkers({ handler: starts.handler, concurrency: context.concurrency });
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          firstStart,
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`no job started within ${FIRST_START_TIMEOUT_MS / 1_000} s`)),
              FIRST_START_TIMEOUT_MS,
            );
          }),
        ]).finally(() => clearTimeout(timer));

        const inBacklog = await phase(frame, {
          system,
          context,
          jobs: scheduledJobs({
            run: token,
            prefix: 'hb',
            count: highCount,
            firstAt: epochNow() + LEAD_MS,
            intervalMs,
            priority: 'high',
          }),
          ledger,
          starts,
          name: 'backlog',
          settledAfterMs: ONSET_MS,
          // The backlog and these high jobs, all handled, before the idle phase.
          settle: () =>
            starts.waitStarted(
              [...backlogIds, ...highIds('hb', highCount)],
              handlingTimeoutMs(context.count),
            ),
          onLastSent: () => {
            frame.figures.push({
              key: 'low_left_at_last_high',
              label: 'low jobs left at the last high send',
              value: context.count - lowStarted,
              unit: 'jobs',
            });
          },
        });
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        const idle = await phase(frame, {
          system,
          context,
          jobs: scheduledJobs({
            run: token,
            prefix: 'hi',
            count: idleCount,
            firstAt: epochNow() + LEAD_MS,
            intervalMs,
            priority: 'high',
          }),
          ledger,
          starts,
          name: 'idle',
          settle: () => awaitLedger(ledger, frame, handlingTimeoutMs(idleCount)),
        });
        if (inBacklog !== undefined && idle !== undefined && idle.p95 > 0) {
          frame.figures.push({
            key: 'p95_ratio',
            label: 'high wait p95 backlog / idle',
            value: inBacklog.p95 / idle.p95,
            unit: '×',
          });
        }
      },
    });
  },
};

/**
 * Sends one phase's high-priority jobs open loop, waits with `settle` (the jobs the phase must see
 * handled) and returns the phase's high-priority wait.
 */
async function phase(
  frame: RunFrame,
  run: {
    readonly system: QueueSystem;
    readonly context: ScenarioContext;
    readonly jobs: readonly Job[];
    readonly ledger: Ledger;
    readonly starts: StartLog;
    readonly name: 'backlog' | 'idle';
    /** Also reports the waits of the jobs scheduled this long after the phase's first. */
    readonly settledAfterMs?: number;
    readonly settle: () => Promise<void>;
    readonly onLastSent?: () => void;
  },
): Promise<LatencySummary | undefined> {
  const { jobs, ledger, context } = run;
  let sent = 0;
  const ticker = setInterval(() => {
    context.progress.update(
      `${frame.label}: ${run.name}: sent ${sent}/${jobs.length} high, handled ${ledger.handled}/${ledger.expected}`,
    );
  }, 250);
  try {
    const machine = new MachineBusyWindow();
    const times = await sendOpenLoop(run.system, jobs, () => {
      sent += 1;
      if (sent === jobs.length) run.onLastSent?.();
    });
    pushSendFigures(frame, times, {
      name: run.name,
      jobs: `the ${run.name} phase's high jobs`,
    });
    frame.figures.push({
      key: `machine_busy_${run.name}`,
      label: `machine busy while the ${run.name} phase's high jobs arrive`,
      value: machine.percentSoFar(),
      unit: '%',
    });
    await run.settle();
    const label = run.name === 'backlog' ? 'high wait in backlog' : 'high wait idle';
    const waits = sinceScheduled(jobs, run.starts.startedAt);
    const summary = pushLatency(frame.figures, `high_${run.name}`, label, waits);
    const firstAt = jobs[0]?.scheduledAt;
    if (run.settledAfterMs !== undefined && firstAt !== undefined) {
      const settledFrom = firstAt + run.settledAfterMs;
      const later = jobs.filter((job) => (job.scheduledAt ?? firstAt) >= settledFrom);
      pushLatency(
        frame.figures,
        `high_${run.name}_settled`,
        `${label} after its first second`,
        sinceScheduled(later, run.starts.startedAt),
      );
    }
    return summary;
  } finally {
    clearInterval(ticker);
  }
}

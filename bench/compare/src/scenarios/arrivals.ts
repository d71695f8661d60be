/**
 * What the latency scenarios (end-to-end, idle pickup, priority) share: open-loop arrivals, the
 * handler-start log, latency figures, and the frame of a run (setup, versions, teardown, verdict).
 *
 * Open loop: every job has a send time fixed in advance at a constant interval, and is sent then
 * whether or not earlier sends were answered; latency runs from that *scheduled* time, so a slow
 * answer or a late harness tick counts against the system instead of quietly delaying the next
 * sends (no coordinated omission).
 */
import type { Ledger } from '../ledger.js';
import { epochNow, summarize, type LatencySummary } from '../latency.js';
import type { Figure } from '../scenario.js';
import type { Job, JobHandler, QueueSystem } from '../system.js';

/** How long completions may trail the last handler start before they count as unavailable. */
export const COMPLETION_TIMEOUT_MS = 30_000;

/** How long the workers may take to handle a phase's jobs after the last send. */
export function handlingTimeoutMs(count: number): number {
  return Math.max(120_000, (count / 10) * 1_000);
}

/** Jobs `${run}-${prefix}${i}` scheduled every `intervalMs` from `firstAt` (epoch ms). */
export function scheduledJobs(options: {
  readonly run: string;
  readonly prefix: string;
  readonly count: number;
  readonly firstAt: number;
  readonly intervalMs: number;
  readonly priority?: 'high' | 'low';
}): Job[] {
  return Array.from({ length: options.count }, (_, i) => ({
    id: `${options.run}-${options.prefix}${i}`,
    scheduledAt: options.firstAt + i * options.intervalMs,
    ...(options.priority === undefined ? {} : { priority: options.priority }),
  }));
}

/** The first handler start of every job (epoch ms), in front of the ledger. */
export class StartLog {
  readonly startedAt = new Map<string, number>();
  private readonly listeners = new Set<(id: string) => void>();

  constructor(private readonly ledger: Ledger) {}

  readonly handler: JobHandler = (job: Job) => {
    if (!this.startedAt.has(job.id)) {
      this.startedAt.set(job.id, job.startedAt ?? epochNow());
      for (const listener of this.listeners) listener(job.id);
    }
    return this.ledger.handler(job);
  };

  /** Calls `listener` with every job's id at its first start, until the returned function is called. */
  onStart(listener: (id: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once every one of `ids` started, or rejects after `timeoutMs`. */
  async waitStarted(ids: readonly string[], timeoutMs: number): Promise<void> {
    const pending = new Set(ids.filter((id) => !this.startedAt.has(id)));
    if (pending.size === 0) return;
    await new Promise<void>((resolve, reject) => {
      const stop = this.onStart((id) => {
        if (pending.delete(id) && pending.size === 0) {
          clearTimeout(timer);
          stop();
          resolve();
        }
      });
      const timer = setTimeout(() => {
        stop();
        reject(
          new Error(`${pending.size} of ${ids.length} jobs not started after ${timeoutMs} ms`),
        );
      }, timeoutMs);
    });
  }
}

/** Harness send lag (p99) above which a result says the machine was too busy to send on time. */
const NOTABLE_SEND_LAG_MS = 5;

export interface SendTimes {
  /** How long each `enqueue` call took until the system acknowledged it (ms). */
  readonly enqueueMs: number[];
  /** How late each call was made against its scheduled time (ms): the harness's own lag. */
  readonly sendLagMs: number[];
}

/**
 * Sends each job on its own at its `scheduledAt` (ascending), one `enqueue([job])` call each, not
 * waiting for earlier calls; resolves once every call was answered. Once a call failed no more are
 * made, and it rejects with that first failure when the calls made were answered.
 */
export async function sendOpenLoop(
  system: QueueSystem,
  jobs: readonly Job[],
  onSent?: (job: Job) => void,
): Promise<SendTimes> {
  const enqueueMs: number[] = [];
  const sendLagMs: number[] = [];
  const calls: Promise<void>[] = [];
  // Each call's failure is caught as it happens: a rejection left unhandled until every send was
  // made would end the whole bench process, before the run's teardown and report.
  let failure: { readonly error: unknown } | undefined;
  let next = 0;
  while (next < jobs.length && failure === undefined) {
    const now = epochNow();
    for (let job = jobs[next]; job !== undefined && (job.scheduledAt ?? 0) <= now;) {
      const calledAt = epochNow();
      sendLagMs.push(calledAt - (job.scheduledAt ?? calledAt));
      calls.push(
        system.enqueue([job]).then(
          () => {
            enqueueMs.push(epochNow() - calledAt);
          },
          (error: unknown) => {
            failure ??= { error };
          },
        ),
      );
      onSent?.(job);
      next += 1;
      job = jobs[next];
    }
    const upcoming = jobs[next];
    if (upcoming !== undefined) {
      const wait = (upcoming.scheduledAt ?? 0) - epochNow();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, wait)));
    }
  }
  await Promise.all(calls);
  if (failure !== undefined) throw failure.error;
  return { enqueueMs, sendLagMs };
}

/** Latency of `ids` from their scheduled send time to `ends` (ms); ids without an end left out. */
export function sinceScheduled(jobs: readonly Job[], ends: ReadonlyMap<string, number>): number[] {
  const out: number[] = [];
  for (const job of jobs) {
    const end = ends.get(job.id);
    if (end !== undefined && job.scheduledAt !== undefined) out.push(end - job.scheduledAt);
  }
  return out;
}

/** p50/p95/p99 (and max) figures of `summary`, in ms, keyed `${key}_p50` … */
export function latencyFigures(key: string, label: string, summary: LatencySummary): Figure[] {
  return [
    { key: `${key}_p50`, label: `${label} p50`, value: summary.p50, unit: 'ms' },
    { key: `${key}_p95`, label: `${label} p95`, value: summary.p95, unit: 'ms' },
    { key: `${key}_p99`, label: `${label} p99`, value: summary.p99, unit: 'ms' },
    { key: `${key}_max`, label: `${label} max`, value: summary.max, unit: 'ms' },
  ];
}

/** Pushes the latency figures of `samples` when there are any. */
export function pushLatency(
  figures: Figure[],
  key: string,
  label: string,
  samples: readonly number[],
): LatencySummary | undefined {
  const summary = summarize(samples);
  if (summary) figures.push(...latencyFigures(key, label, summary));
  return summary;
}

/**
 * Pushes the figures of an open-loop run's sends — how long the system took to accept each call,
 * and how late the harness itself made it — with a note when the harness's own lag passed
 * {@link NOTABLE_SEND_LAG_MS} at p99: parts of a job's wait from its scheduled send that a reading
 * must tell apart. A `phase` (the priority scenario's) suffixes the keys and names its jobs.
 */
export function pushSendFigures(
  frame: { readonly figures: Figure[]; readonly notes: string[] },
  times: SendTimes,
  phase?: { readonly name: string; readonly jobs: string },
): void {
  const [keySuffix, labelSuffix] = phase ? [`_${phase.name}`, `, ${phase.name}`] : ['', ''];
  pushLatency(frame.figures, `enqueue${keySuffix}`, `enqueue call${labelSuffix}`, times.enqueueMs);
  const lag = pushLatency(
    frame.figures,
    `send_lag${keySuffix}`,
    `harness send lag${labelSuffix}`,
    times.sendLagMs,
  );
  if (lag === undefined || lag.p99 <= NOTABLE_SEND_LAG_MS) return;
  const late = `late (its own lag p50 ${lag.p50.toFixed(1)} ms, p99 ${lag.p99.toFixed(1)} ms: a busy machine)`;
  frame.notes.push(
    phase
      ? `the harness sent ${phase.jobs} ${late}; their waits include it`
      : `the harness sent ${late}; the latencies include it`,
  );
}

/** Skips the batched variants: these scenarios time jobs sent one at a time. */
export function skipBatched(system: { readonly batched: boolean }): string | undefined {
  return system.batched
    ? 'batched variant: this scenario sends jobs one at a time (batching is measured by drain)'
    : undefined;
}

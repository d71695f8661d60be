/**
 * Drain (issue 7, workload 1): N one-step no-op jobs enqueued while no worker runs (the enqueue
 * rate), then the workers started and timed until the ledger is complete (the processing rate).
 * The processing rate runs from when the workers run to the last handler start, so that worker
 * start-up (a process for Sluice, a loop for the raw floors) is reported apart, not mixed into it.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Ledger } from '../ledger.js';
import { chunks } from '../pool.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { Job, QueueSystem } from '../system.js';
import { awaitLedger, runFramed } from './framed-run.js';

/** Enqueued per `enqueue` call: small enough for a live progress line, large enough to batch. */
const ENQUEUE_CHUNK = 1_000;

/** How long the workers may take: generous (two minutes, or 10 jobs/s on a shared machine). */
function processingTimeoutMs(count: number): number {
  return Math.max(120_000, (count / 10) * 1_000);
}

export const drain: Scenario = {
  name: 'drain',
  description: 'N no-op jobs pre-enqueued with workers stopped, then drained',
  defaultCount: 20_000,
  smokeCount: 200,

  async run(system: QueueSystem, context: ScenarioContext): Promise<ScenarioResult> {
    const { count, concurrency, progress } = context;
    const run = randomBytes(4).toString('hex');
    const jobs: Job[] = Array.from({ length: count }, (_, i) => ({ id: `${run}-${i}` }));
    const ledger = new Ledger(jobs.map((j) => j.id));
    return runFramed({
      scenario: 'drain',
      system,
      context,
      ledger,
      body: async (frame) => {
        const { figures, notes, label } = frame;
        let enqueued = 0;
        const enqueueStart = performance.now();
        for (const slice of chunks(jobs, ENQUEUE_CHUNK)) {
          await system.enqueue(slice);
          enqueued += slice.length;
          const seconds = (performance.now() - enqueueStart) / 1_000;
          progress.update(
            `${label}: enqueued ${enqueued}/${count} (${rate(enqueued, seconds).toFixed(0)} jobs/s)`,
          );
        }
        const enqueueSeconds = (performance.now() - enqueueStart) / 1_000;
        figures.push(
          {
            key: 'enqueue_rate',
            label: 'enqueue',
            value: rate(count, enqueueSeconds),
            unit: 'jobs/s',
          },
          { key: 'enqueue_s', label: 'enqueue time', value: enqueueSeconds, unit: 's' },
        );
        if (ledger.handled > 0) {
          notes.push(`${ledger.handled} jobs were handled before the workers were started`);
        }

        const workersStart = performance.now();
        let workersReady = Number.POSITIVE_INFINITY;
        const ticker = setInterval(() => {
          const seconds = (performance.now() - (ledger.firstAt ?? workersStart)) / 1_000;
          progress.update(
            `${label}: handled ${ledger.handled}/${count} (${rate(ledger.handled, seconds).toFixed(0)} jobs/s)`,
          );
        }, 250);
        try {
          await system.startWorkers({ handler: ledger.handler, concurrency });
          workersReady = performance.now();
          const timeoutMs = processingTimeoutMs(count);
          await awaitLedger(ledger, frame, timeoutMs);
        } finally {
          clearInterval(ticker);
        }
        const first = ledger.firstAt ?? workersStart;
        const last = ledger.lastAt ?? first;
        // From when the workers ran (startWorkers resolved, or the first job started if that came
        // first: a process that reports itself ready after it began work) to the last job's start.
        const processingSeconds = Math.max((last - Math.min(first, workersReady)) / 1_000, 1e-6);
        figures.push(
          {
            key: 'processing_rate',
            label: 'processing',
            value: rate(count, processingSeconds),
            unit: 'jobs/s',
          },
          { key: 'processing_s', label: 'processing time', value: processingSeconds, unit: 's' },
          {
            key: 'first_start_ms',
            label: 'workers start → first job',
            value: first - workersStart,
            unit: 'ms',
          },
        );
      },
    });
  },
};

function rate(jobs: number, seconds: number): number {
  return seconds > 0 ? jobs / seconds : 0;
}

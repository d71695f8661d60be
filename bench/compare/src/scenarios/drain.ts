/**
 * Drain (issue 7, workload 1): N one-step no-op jobs enqueued while no worker runs (the enqueue
 * rate), then the workers started and timed until the ledger is complete (the processing rate).
 * The processing rate runs from when the workers run to the last handler start, so that worker
 * start-up (a process for Sluice, a loop for the raw floors) is reported apart, not mixed into it.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Ledger } from '../ledger.js';
import type { Scenario, ScenarioContext, ScenarioResult } from '../scenario.js';
import type { Job, QueueSystem } from '../system.js';
import { enqueueInChunks, processBacklog, processingTimeoutMs, rate } from './backlog.js';
import { runFramed } from './framed-run.js';

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
        const enqueueSeconds = await enqueueInChunks(
          jobs,
          (slice) => system.enqueue(slice),
          (enqueued, seconds) =>
            progress.update(
              `${label}: enqueued ${enqueued}/${count} (${rate(enqueued, seconds).toFixed(0)} jobs/s)`,
            ),
        );
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

        const processing = await processBacklog({
          frame,
          completion: ledger,
          startWorkers: () => system.startWorkers({ handler: ledger.handler, concurrency }),
          timeoutMs: processingTimeoutMs(count),
          progressLine: (workersStart) => {
            const seconds = (performance.now() - (ledger.firstAt ?? workersStart)) / 1_000;
            return `${label}: handled ${ledger.handled}/${count} (${rate(ledger.handled, seconds).toFixed(0)} jobs/s)`;
          },
          onProgress: (line) => progress.update(line),
        });
        const processingSeconds = processing.seconds;
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
            value: processing.first - processing.workersStart,
            unit: 'ms',
          },
        );
      },
    });
  },
};

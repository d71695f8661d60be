/**
 * The start log the latency scenarios time jobs by: a job's first start counts, at the time its
 * adapter says the handler began when the handler ran in another process, else at the call.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { epochNow } from '../latency.js';
import { Ledger } from '../ledger.js';
import type { Job, QueueSystem } from '../system.js';
import { scheduledJobs, sendOpenLoop, StartLog } from './arrivals.js';

test('a start is the time the handler reported, else the call; the first start counts', async () => {
  const ledger = new Ledger(['remote', 'local']);
  const starts = new StartLog(ledger);
  await starts.handler({ id: 'remote', startedAt: 1_000.25 });
  const before = epochNow();
  await starts.handler({ id: 'local' });
  const after = epochNow();
  await starts.handler({ id: 'remote', startedAt: 2_000 });
  assert.equal(starts.startedAt.get('remote'), 1_000.25);
  const local = starts.startedAt.get('local');
  assert.ok(local !== undefined && local >= before && local <= after);
  assert.equal(ledger.verdict().duplicates, 1, 'the second start still reaches the ledger');
});

test('a refused send fails the run: sendOpenLoop rejects with it, and nothing goes unhandled', async () => {
  // Node ends the process on an unhandled rejection: the bench would crash mid-run, leaving the
  // system it measured set up (processes, databases, queues) and writing no report.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const refusal = new Error('refused');
    const enqueued: string[] = [];
    const system = {
      enqueue: (jobs: readonly Job[]) => {
        enqueued.push(...jobs.map((j) => j.id));
        return jobs[0]?.id === 'r-m0' ? Promise.reject(refusal) : Promise.resolve();
      },
    } as unknown as QueueSystem;
    const jobs = scheduledJobs({
      run: 'r',
      prefix: 'm',
      count: 4,
      firstAt: epochNow() + 5,
      intervalMs: 40,
    });
    await assert.rejects(sendOpenLoop(system, jobs), (error) => error === refusal);
    // Past the ticks in which Node reports a rejection nobody handled.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(unhandled, []);
    assert.deepEqual(enqueued, ['r-m0'], 'no more sends once one was refused');
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

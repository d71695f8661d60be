import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '@sluice/telemetry';
import { startBatchLoop, type BatchReport } from './batch-loop.js';

const quiet = createLogger({
  service: 'batch-loop-test',
  level: 'fatal',
  destination: new Writable({ write: (_chunk, _encoding, done) => done() }),
});

describe('startBatchLoop', () => {
  it('shows every failed batch to onError and keeps going, even when the hook throws', async () => {
    const seen: string[] = [];
    let batches = 0;
    let succeeded: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (succeeded = resolve));
    const loop = startBatchLoop({
      name: 'test',
      pollMs: 10,
      log: quiet,
      runBatch: () => {
        batches += 1;
        if (batches <= 2) return Promise.reject(new Error(`outage ${batches}`));
        succeeded();
        return Promise.resolve(false);
      },
      onError: (error) => {
        seen.push((error as Error).message);
        throw new Error('a broken hook');
      },
    });
    loop.wake();
    await done;
    await loop.stop();
    assert.deepEqual(seen, ['outage 1', 'outage 2']);
    assert.ok(batches >= 3);
  });

  it('gathers only while busy: work arrived during a batch of more than one item', async () => {
    const sleeps: number[] = [];
    const sleepsBefore: number[][] = [];
    const waiters = new Map<number, () => void>();
    const batchStarted = (n: number) => new Promise<void>((resolve) => waiters.set(n, resolve));
    const started = [2, 3, 4, 5].map(batchStarted);
    // What each batch reports, and whether work arrives while it runs.
    const script: Array<{ report: boolean | BatchReport; wakeDuring: boolean }> = [
      { report: { more: false, handled: 2 }, wakeDuring: true }, // busy: gather
      { report: { more: false, handled: 1 }, wakeDuring: true }, // one item: a quiet pace
      { report: false, wakeDuring: false }, // caught up: the next wake-up runs at once
      { report: false, wakeDuring: true }, // says no count: busy
      { report: false, wakeDuring: false },
    ];
    let batches = 0;
    const loop = startBatchLoop({
      name: 'gather-test',
      pollMs: 60_000,
      gatherMs: 10,
      log: quiet,
      sleep: (ms) => {
        sleeps.push(ms);
        return Promise.resolve();
      },
      runBatch: () => {
        batches += 1;
        sleepsBefore[batches] = [...sleeps];
        const step = script[batches - 1] ?? { report: false, wakeDuring: false };
        if (step.wakeDuring) queueMicrotask(() => loop.wake());
        waiters.get(batches)?.();
        return Promise.resolve(step.report);
      },
    });
    try {
      await started[0];
      assert.deepEqual(sleepsBefore[2], [10], 'work during a batch of two: gathered');
      await started[1];
      assert.deepEqual(sleepsBefore[3], [10], 'work during a batch of one: at once');
      // The loop has caught up and waits (a turn of the event loop lets it get there).
      await new Promise((resolve) => setImmediate(resolve));
      loop.wake();
      await started[2];
      assert.deepEqual(sleepsBefore[4], [10], 'a wake-up that finds the loop waiting: at once');
      await started[3];
      assert.deepEqual(sleepsBefore[5], [10, 10], 'a batch that gives no count counts as busy');
    } finally {
      await loop.stop();
    }
  });
});

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '@sluice/telemetry';
import { pauseAfter, startBatchLoop, type BatchReport } from './batch-loop.js';

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

  it('looks less often while its passes are idle, never past what falls due, and at the poll again on work', async () => {
    // Each pass: what it reports, and whether work arrives while it runs.
    const script: Array<{ report: BatchReport; wakeDuring?: boolean }> = [
      { report: { more: false, handled: 0, idle: true } }, // 2 polls
      { report: { more: false, handled: 0, idle: true } }, // 4 polls
      { report: { more: false, handled: 0, idle: true } }, // 8 polls, capped at the idle pause
      { report: { more: false, handled: 0, idle: true, dueInMs: 300 } }, // a backoff ends first
      { report: { more: false, handled: 0, idle: true, dueInMs: 0 } }, // due: a few ms
      { report: { more: false, handled: 1 } }, // work: the poll
      { report: { more: false, handled: 0, idle: true } }, // 2 polls again
      { report: { more: false, handled: 0, idle: true }, wakeDuring: true }, // woken: the poll
      { report: { more: false, handled: 0, idle: true } }, // 2 polls
    ];
    const pauses: number[] = [];
    let batches = 0;
    let finished: () => void = () => undefined;
    const allRun = new Promise<void>((resolve) => (finished = resolve));
    const loop = startBatchLoop({
      name: 'idle-test',
      pollMs: 1_000,
      idlePollMs: 5_000,
      log: quiet,
      // No pause is waited out: the test wakes the loop as soon as it has chosen one (but after a
      // pass woken while it ran, whose wake-up ends the pause already).
      onPause: (ms) => {
        pauses.push(ms);
        if (pauses.length === script.length) finished();
        else if (script[pauses.length - 1]?.wakeDuring !== true) queueMicrotask(() => loop.wake());
      },
      runBatch: () => {
        const step = script[batches] ?? { report: { more: false, handled: 0 } };
        batches += 1;
        if (step.wakeDuring) loop.wake();
        return Promise.resolve(step.report);
      },
    });
    await allRun;
    await loop.stop();
    assert.deepEqual(pauses, [2_000, 4_000, 5_000, 300, 5, 1_000, 2_000, 1_000, 2_000]);
  });
});

describe('a batch', () => {
  it('is told whether the poll started it, or a wake-up', async () => {
    const seen: boolean[] = [];
    let fourth: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (fourth = resolve));
    const loop = startBatchLoop({
      name: 'polled-test',
      pollMs: 5,
      log: quiet,
      runBatch: ({ polled }) => {
        seen.push(polled);
        if (seen.length === 2) loop.wake(); // during the second batch: the third is woken
        if (seen.length === 4) fourth();
        return Promise.resolve(false);
      },
    });
    await reached;
    await loop.stop();
    assert.deepEqual(seen.slice(0, 4), [false, true, false, true]);
  });
});

describe('wakeIn', () => {
  it('runs a batch when the earliest time it was told comes, long before the poll', async () => {
    const batchesAt: number[] = [];
    let nextBatch: () => void = () => undefined;
    const batch = () => new Promise<void>((resolve) => (nextBatch = resolve));
    const first = batch();
    const loop = startBatchLoop({
      name: 'wake-in-test',
      pollMs: 60_000,
      log: quiet,
      runBatch: () => {
        batchesAt.push(performance.now());
        nextBatch();
        return Promise.resolve(false);
      },
    });
    await first; // the start's batch; then the loop waits for its minute
    const second = batch();
    const toldAt = performance.now();
    loop.wakeIn(5_000);
    loop.wakeIn(100); // the earliest counts
    loop.wakeIn(3_000);
    await second;
    const waited = (batchesAt[1] ?? Infinity) - toldAt;
    assert.ok(waited >= 90 && waited < 2_000, `woken after ${waited} ms`);
    await loop.stop();
  });
});

describe('pauseAfter', () => {
  it('is the poll without idle passes, whatever the idle pause', () => {
    assert.equal(pauseAfter(1_000, 5_000, 0, undefined), 1_000);
    assert.equal(pauseAfter(1_000, 1_000, 3, undefined), 1_000, 'pacing off');
    assert.equal(pauseAfter(1_000, 200, 3, undefined), 1_000, 'never below the poll');
  });

  it('doubles per idle pass up to the idle pause, and stays there', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 60, 2_000].map((streak) => pauseAfter(100, 1_000, streak, undefined)),
      [200, 400, 800, 1_000, 1_000, 1_000],
    );
  });

  it('ends when known work falls due, a few ms at least', () => {
    assert.equal(pauseAfter(1_000, 5_000, 3, 2_500), 2_500);
    assert.equal(pauseAfter(1_000, 5_000, 0, 300), 300);
    assert.equal(pauseAfter(1_000, 5_000, 3, 9_000), 5_000);
    assert.equal(pauseAfter(1_000, 5_000, 3, -40), 5);
  });
});

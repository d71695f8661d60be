import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_PROGRESS_MESSAGE_CHARS,
  createProgressReporter,
  type ProgressValue,
} from './progress-reporter.js';

const INTERVAL_MS = 80;

/** A reporter whose writes are recorded with their start time. */
function recorder(options: { fail?: boolean } = {}) {
  const writes: Array<ProgressValue & { at: number }> = [];
  const warnings: string[] = [];
  const reporter = createProgressReporter({
    intervalMs: INTERVAL_MS,
    write: (value) => {
      writes.push({ ...value, at: performance.now() });
      return options.fail ? Promise.reject(new Error('database down')) : Promise.resolve();
    },
    log: {
      warn: (_fields: unknown, message: string) => void warnings.push(message),
      debug: () => undefined,
    } as never,
  });
  return { reporter, writes, warnings };
}

describe('progress reporter', () => {
  it('writes the first report at once and coalesces the next ones into the latest', async () => {
    const { reporter, writes } = recorder();
    const first = reporter.report(0.1, 'one');
    const rest = [reporter.report(0.2, 'two'), reporter.report(0.3, 'three')];
    await first;
    assert.deepEqual(
      writes.map((w) => w.fraction),
      [0.1],
    );
    await Promise.all(rest);
    assert.deepEqual(
      writes.map(({ fraction, message }) => ({ fraction, message })),
      [
        { fraction: 0.1, message: 'one' },
        { fraction: 0.3, message: 'three' },
      ],
    );
    await reporter.close();
    assert.equal(writes.length, 2, 'nothing left to write at close');
  });

  it('never starts two writes within one interval', async () => {
    const { reporter, writes } = recorder();
    for (let i = 1; i <= 4; i += 1) {
      // Each report waits for its own write: one per interval at most, whatever the caller does.
      await reporter.report(i / 4);
    }
    assert.deepEqual(
      writes.map((w) => w.fraction),
      [0.25, 0.5, 0.75, 1],
    );
    for (let i = 1; i < writes.length; i += 1) {
      const gap = (writes[i]?.at ?? 0) - (writes[i - 1]?.at ?? 0);
      // Timers may fire a millisecond early by the performance clock; never a whole interval.
      assert.ok(gap >= INTERVAL_MS - 2, `writes ${i - 1} and ${i} are ${gap.toFixed(1)} ms apart`);
    }
    await reporter.close();
  });

  it('writes the pending value at close without waiting for the interval, then ignores reports', async () => {
    const { reporter, writes } = recorder();
    await reporter.report(0.5);
    const pending = reporter.report(0.9, 'almost');
    const closedAt = performance.now();
    await reporter.close();
    await pending;
    assert.deepEqual(
      writes.map((w) => w.fraction),
      [0.5, 0.9],
    );
    assert.ok((writes[1]?.at ?? Infinity) - closedAt < INTERVAL_MS, 'written at close, not later');
    await reporter.report(1, 'late');
    assert.equal(writes.length, 2, 'a report after close writes nothing');
  });

  it('logs a failed write and still resolves', async () => {
    const { reporter, writes, warnings } = recorder({ fail: true });
    await reporter.report(0.4);
    await reporter.close();
    assert.equal(writes.length, 1);
    assert.deepEqual(warnings, ['could not record step progress']);
  });

  it('writes U+0000 of a message as U+FFFD, which Postgres can store', async () => {
    const { reporter, writes } = recorder();
    await reporter.report(0.5, 'half\u0000way');
    assert.equal(writes[0]?.message, 'half\uFFFDway');
    await reporter.close();
  });

  it('refuses a fraction outside 0..1 at once', () => {
    const { reporter } = recorder();
    for (const bad of [
      Number.NaN,
      -0.01,
      1.01,
      Number.POSITIVE_INFINITY,
      '0.5' as unknown as number,
    ]) {
      assert.throws(() => reporter.report(bad), RangeError);
    }
  });

  it('cuts long messages', async () => {
    const { reporter, writes } = recorder();
    await reporter.report(0, 'x'.repeat(MAX_PROGRESS_MESSAGE_CHARS + 10));
    assert.equal(writes[0]?.message.length, MAX_PROGRESS_MESSAGE_CHARS);
    await reporter.close();
  });
});

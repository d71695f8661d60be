import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MIN_JOBS_FOR_PACE, paceOf, type PacedJob } from './pace.js';

/** `count` jobs sent `intervalMs` apart from t = 1,000 ms, each started `startOf(i, sentAt)`. */
function arrivals(
  count: number,
  intervalMs: number,
  startOf: (index: number, sentAt: number) => number | undefined,
): PacedJob[] {
  return Array.from({ length: count }, (_, i) => {
    const scheduledAt = 1_000 + i * intervalMs;
    return { scheduledAt, startedAt: startOf(i, scheduledAt) };
  });
}

/** A deterministic stand-in for a random spread in [0, 1): the same every run. */
function spread(i: number): number {
  return (i * 0.618033988749895) % 1;
}

describe('paceOf', () => {
  it('reads a steady lateness as starts at the arrival rate', () => {
    const pace = paceOf(arrivals(3_000, 2.5, (_, sentAt) => sentAt + 40));
    assert.ok(pace);
    assert.ok(Math.abs(pace.arrivalRate - 400) < 1, `arrivals ${pace.arrivalRate}`);
    assert.ok(Math.abs(pace.startRate - 400) < 1, `starts ${pace.startRate}`);
    assert.deepEqual(pace.waitByTenth, Array<number>(10).fill(40), 'the same wait in every tenth');
  });

  it('reads a random spread of half a second as starts at the arrival rate', () => {
    // Each job starts anywhere within half a second of its send (pg-boss's poll, seen from afar).
    const pace = paceOf(arrivals(3_000, 2.5, (i, sentAt) => sentAt + 500 * spread(i)));
    assert.ok(pace);
    assert.ok(Math.abs(pace.startRate / pace.arrivalRate - 1) < 0.02, `starts ${pace.startRate}`);
  });

  it('finds a system that falls behind, and the rate it got through', () => {
    // Sent at 723 a second, started at most 480 a second: the backlog grows all run.
    let nextFree = 0;
    const pace = paceOf(
      arrivals(3_000, 1_000 / 723, (_, sentAt) => {
        nextFree = Math.max(nextFree, sentAt) + 1_000 / 480;
        return nextFree;
      }),
    );
    assert.ok(pace);
    assert.ok(Math.abs(pace.startRate - 480) < 2, `starts ${pace.startRate}`);
    assert.ok(Math.abs(pace.arrivalRate - 723) < 2, `arrivals ${pace.arrivalRate}`);
    // The wait grows through the run: each tenth's 300 jobs leave ~0.65 s more behind.
    const steps = pace.waitByTenth.slice(1).map((wait, i) => wait - pace.waitByTenth[i]!);
    for (const step of steps)
      assert.ok(Math.abs(step - 300 * (1_000 / 480 - 1_000 / 723)) < 2, `${step}`);
  });

  it('shows a queue that formed early and was worked off', () => {
    // 400 a second arrive; the first 300 jobs find a pause of a second, then the system starts up
    // to 600 a second until it has caught up.
    let nextFree = 0;
    const pace = paceOf(
      arrivals(3_000, 2.5, (i, sentAt) => {
        nextFree = Math.max(nextFree, i === 0 ? sentAt + 1_000 : sentAt) + 1_000 / 600;
        return nextFree;
      }),
    );
    assert.ok(pace);
    const [first, second, , , , , , , , last] = pace.waitByTenth;
    assert.ok(first! > 800 && second! < first! && last! < 5, `${pace.waitByTenth.join(', ')}`);
  });

  it('leaves out a slow start, the first tenth', () => {
    // The first 200 jobs wait for workers coming out of idle, then everything runs on time.
    const pace = paceOf(arrivals(3_000, 2.5, (i, sentAt) => sentAt + (i < 200 ? 400 - i : 10)));
    assert.ok(pace);
    assert.ok(Math.abs(pace.startRate - 400) < 1, `starts ${pace.startRate}`);
    assert.deepEqual(
      pace.waitByTenth,
      [250.5, ...Array<number>(9).fill(10)],
      'its wait is still shown',
    );
  });

  it('says nothing of too few started jobs, or of sends that do not advance', () => {
    assert.equal(paceOf(arrivals(MIN_JOBS_FOR_PACE - 1, 10, (_, sentAt) => sentAt + 5)), undefined);
    const half = arrivals(2 * MIN_JOBS_FOR_PACE - 2, 10, (i, sentAt) =>
      i % 2 === 0 ? sentAt + 5 : undefined,
    );
    assert.equal(paceOf(half), undefined, 'half of them never started');
    assert.equal(paceOf(arrivals(1_000, 0, (_, sentAt) => sentAt + 5)), undefined);
  });
});

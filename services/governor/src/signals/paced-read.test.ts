/**
 * The pace of a costly signal read: taken again only once its cost is a bounded share of the time
 * since it began; a cheap read at every call; a failed read never reused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PacedRead } from './paced-read.js';

/** A clock the test moves, and a read that takes `costMs` on it and counts its calls. */
function pacedCounter(costMs: number, dutyShare = 0.05) {
  let clock = 0;
  let reads = 0;
  let fail = false;
  const read = new PacedRead(
    () => {
      clock += costMs;
      if (fail) return Promise.reject(new Error('the database is away'));
      reads += 1;
      return Promise.resolve(reads);
    },
    { dutyShare, now: () => clock },
  );
  return {
    read,
    advance: (ms: number) => (clock += ms),
    reads: () => reads,
    failNext: (value: boolean) => (fail = value),
  };
}

describe('PacedRead', () => {
  it('takes a costly read again only after its cost over the duty share', async () => {
    // 100 ms at 5 %: the next read no sooner than 2 s after this one began.
    const paced = pacedCounter(100);
    assert.equal(await paced.read.get(), 1);
    paced.advance(900); // 1 s after the first began
    assert.equal(await paced.read.get(), 1, 'the latest value, not a new read');
    paced.advance(999); // 1,999 ms
    assert.equal(await paced.read.get(), 1);
    paced.advance(1); // 2,000 ms
    assert.equal(await paced.read.get(), 2);
    assert.equal(paced.reads(), 2);
  });

  it('takes a cheap read at every call a tick apart', async () => {
    const paced = pacedCounter(5);
    for (let tick = 1; tick <= 4; tick += 1) {
      assert.equal(await paced.read.get(), tick);
      paced.advance(1_000);
    }
  });

  it('reads again after a failed read, and never answers from it', async () => {
    const paced = pacedCounter(100);
    assert.equal(await paced.read.get(), 1);
    paced.advance(5_000);
    paced.failNext(true);
    await assert.rejects(paced.read.get(), /away/);
    paced.failNext(false);
    assert.equal(await paced.read.get(), 2, 'no pause after the failure');
  });

  it('refuses a duty share outside (0, 1]', () => {
    for (const dutyShare of [0, -0.1, 1.5, Number.NaN]) {
      assert.throws(() => new PacedRead(() => Promise.resolve(1), { dutyShare }), RangeError);
    }
  });
});

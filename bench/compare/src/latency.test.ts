import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { epochNow, latencies, percentile, summarize } from './latency.js';

describe('percentile (nearest rank)', () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
  const cases: Array<[name: string, sorted: number[], p: number, expected: number | undefined]> = [
    ['no samples', [], 50, undefined],
    ['one sample is every percentile', [7], 1, 7],
    ['one sample, p100', [7], 100, 7],
    ['p50 of 1..100', hundred, 50, 50],
    ['p95 of 1..100', hundred, 95, 95],
    ['p99 of 1..100', hundred, 99, 99],
    ['p100 is the maximum', hundred, 100, 100],
    ['p50 of two is the lower', [1, 2], 50, 1],
    ['p51 of two is the upper', [1, 2], 51, 2],
    ['p99 of ten is the maximum', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99, 10],
    ['p90 of ten', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90, 9],
  ];
  for (const [name, sorted, p, expected] of cases) {
    it(name, () => assert.equal(percentile(sorted, p), expected));
  }

  it('refuses percentiles outside (0, 100]', () => {
    assert.throws(() => percentile([1], 0), RangeError);
    assert.throws(() => percentile([1], 101), RangeError);
    assert.throws(() => percentile([1], Number.NaN), RangeError);
  });
});

describe('summarize', () => {
  it('sorts numerically (not as text) and leaves its input alone', () => {
    const samples = [100, 9, 20, 3, 1_000];
    const summary = summarize(samples);
    assert.deepEqual(samples, [100, 9, 20, 3, 1_000]);
    assert.deepEqual(summary, {
      count: 5,
      min: 3,
      p50: 20,
      p95: 1_000,
      p99: 1_000,
      max: 1_000,
      mean: 226.4,
    });
  });

  it('is undefined without samples', () => assert.equal(summarize([]), undefined));

  it('keeps fractions of a millisecond', () => {
    assert.equal(summarize([0.25, 0.5, 0.75])?.p50, 0.5);
  });
});

describe('latencies', () => {
  it('pairs starts with ends by id and leaves out ids that never ended', () => {
    const starts = new Map([
      ['a', 10],
      ['b', 20],
      ['c', 30],
    ]);
    const ends = new Map([
      ['a', 15],
      ['c', 42],
      ['x', 99],
    ]);
    assert.deepEqual(latencies(starts, ends), [5, 12]);
  });
});

describe('epochNow', () => {
  it('is on the wall clock, within a few ms of Date.now()', () => {
    assert.ok(Math.abs(epochNow() - Date.now()) < 50);
  });
});

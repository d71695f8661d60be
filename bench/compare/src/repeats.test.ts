import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { combineRuns, median } from './repeats.js';
import type { ScenarioResult } from './scenario.js';

function run(processing: number, failure?: string): ScenarioResult {
  return {
    scenario: 'drain',
    system: { name: 'sluice', durability: 'fsync per commit', batched: false },
    count: 100,
    concurrency: 16,
    versions: {},
    figures: [
      { key: 'processing_rate', label: 'processing', value: processing, unit: 'jobs/s' },
      { key: 'first_start_ms', label: 'start → first job', value: processing / 10, unit: 'ms' },
    ],
    notes: [],
    ...(failure === undefined ? {} : { failure }),
  };
}

describe('median', () => {
  it('takes the middle value, or the mean of the middle two', () => {
    assert.equal(median([5, 1, 3]), 3);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.throws(() => median([]));
  });
});

describe('combineRuns', () => {
  it('shows the median of each figure and notes the range', () => {
    const combined = combineRuns([run(100), run(300), run(200)], [run(50)]);
    assert.equal(combined.failure, undefined);
    assert.equal(combined.figures.find((f) => f.key === 'processing_rate')?.value, 200);
    assert.equal(combined.figures.find((f) => f.key === 'first_start_ms')?.value, 20);
    assert.ok(combined.notes.some((n) => n.includes('median of 3 runs')));
    assert.ok(combined.notes.some((n) => n.includes('processing 100–300 jobs/s')));
    assert.ok(combined.notes.some((n) => n.includes('1 warm-up run before, discarded')));
  });

  it('fails the whole when one run failed, saying which', () => {
    const combined = combineRuns([run(100), run(0, '3 missing'), run(200)]);
    assert.equal(combined.failure, 'run 2 of 3: 3 missing');
  });

  it('fails the whole when a warm-up run lost or duplicated work, though its figures are discarded', () => {
    const combined = combineRuns([run(100), run(300), run(200)], [run(0, '2 duplicated of 100')]);
    assert.equal(combined.failure, 'warm-up run: 2 duplicated of 100');
    const single = combineRuns([run(100)], [run(0, '1 missing of 100')]);
    assert.equal(single.failure, 'warm-up run: 1 missing of 100');
  });

  it('takes a figure the first run lacks from the runs that have it, saying how many', () => {
    const without = {
      ...run(100),
      figures: run(100).figures.filter((f) => f.key !== 'first_start_ms'),
    };
    const combined = combineRuns([without, run(300), run(200)]);
    assert.equal(combined.figures.find((f) => f.key === 'first_start_ms')?.value, 25);
    assert.ok(
      combined.notes.some((n) => n.includes('start → first job 20.0–30.0 ms (2 of 3 runs)')),
      combined.notes.join('\n'),
    );
  });

  it("keeps every run's failure-like notes, once each, saying which runs; ordinary ones once", () => {
    const noted = (result: ScenarioResult, ...notes: string[]): ScenarioResult => ({
      ...result,
      notes: ['100 measured jobs after 20 warm-up jobs', ...notes],
    });
    const early = '12 jobs were handled before the workers were started';
    const combined = combineRuns(
      [
        noted(run(100), 'send → start p50 of each tenth: 1, 2 ms'),
        noted(run(300), 'teardown failed: stream not found', early, 'send → start: 3, 4 ms'),
        noted(run(200), early, 'completion seen for 90 of 100 jobs within 30 s'),
      ],
      [noted(run(50), 'processes() failed: ESRCH')],
    );
    assert.equal(combined.failure, undefined);
    const notes = combined.notes;
    assert.deepEqual(
      notes.filter((n) => n.startsWith('100 measured jobs')),
      ['100 measured jobs after 20 warm-up jobs'],
    );
    assert.ok(notes.includes('teardown failed: stream not found (run 2 of 3)'), notes.join('\n'));
    assert.ok(notes.includes(`${early} (runs 2, 3 of 3)`), notes.join('\n'));
    assert.ok(notes.includes('completion seen for 90 of 100 jobs within 30 s (run 3 of 3)'));
    assert.ok(notes.includes('processes() failed: ESRCH (warm-up run)'), notes.join('\n'));
    // An ordinary note of a later run (its own figures in words) is not repeated.
    assert.ok(!notes.some((n) => n.startsWith('send → start: 3, 4')), notes.join('\n'));
  });

  it("a failed result keeps the other runs' failure-like notes too", () => {
    const combined = combineRuns([
      { ...run(100), notes: ['teardown failed: connection reset'] },
      run(0, '3 missing'),
    ]);
    assert.equal(combined.failure, 'run 2 of 2: 3 missing');
    assert.ok(
      combined.notes.includes('teardown failed: connection reset (run 1 of 2)'),
      combined.notes.join('\n'),
    );
  });

  it('passes a single run through', () => {
    assert.deepEqual(combineRuns([run(100)]), run(100));
  });
});

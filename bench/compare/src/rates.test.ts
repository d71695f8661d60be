import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_DRAIN_RATES, drainRateOf } from './rates.js';
import type { ScenarioResult } from './scenario.js';

function drained(name: string, rate: number, failure?: string): ScenarioResult {
  return {
    scenario: 'drain',
    system: { name, durability: 'fsync per commit', batched: false },
    count: 100,
    concurrency: 16,
    versions: {},
    figures: [
      { key: 'enqueue_rate', label: 'enqueue', value: rate * 2, unit: 'jobs/s' },
      { key: 'processing_rate', label: 'processing', value: rate, unit: 'jobs/s' },
    ],
    failure,
    notes: [],
  };
}

describe('drainRateOf', () => {
  it('prefers --rate-for over a measured rate', () => {
    assert.deepEqual(drainRateOf('pg-boss', { 'pg-boss': 70 }, [drained('pg-boss', 900)]), {
      jobsPerSecond: 70,
      processingPerSecond: 70,
      source: '--rate-for',
    });
  });

  it('takes the last successful drain of the same system', () => {
    const rate = drainRateOf('pg-boss', {}, [
      drained('pg-boss', 900),
      drained('sluice', 50),
      drained('pg-boss', 950),
      drained('pg-boss', 10, '3 missing of 100'),
    ]);
    assert.equal(rate?.jobsPerSecond, 950);
    assert.match(rate?.source ?? '', /measured by drain in this run/);
  });

  it('takes the lower of enqueue and processing', () => {
    const slowEnqueue: ScenarioResult = {
      ...drained('graphile-worker', 500),
      figures: [
        { key: 'enqueue_rate', label: 'enqueue', value: 200, unit: 'jobs/s' },
        { key: 'processing_rate', label: 'processing', value: 500, unit: 'jobs/s' },
      ],
    };
    const rate = drainRateOf('graphile-worker', {}, [slowEnqueue]);
    assert.equal(rate?.jobsPerSecond, 200);
    assert.equal(rate?.processingPerSecond, 500);
  });

  it('falls back to the table, then to nothing', () => {
    assert.equal(drainRateOf('sluice', {}, [])?.jobsPerSecond, DEFAULT_DRAIN_RATES['sluice']);
    assert.equal(drainRateOf('bullmq-aof', {}, []), undefined);
  });
});

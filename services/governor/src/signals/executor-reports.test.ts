import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ExecutorReport } from '@sluice/bus';
import { ExecutorReports } from './executor-reports.js';

function report(
  id: string,
  fields: Partial<ExecutorReport> & { calls?: number; limited?: number; limit?: number } = {},
): ExecutorReport {
  const { calls, limited, limit, ...rest } = fields;
  return {
    executor_id: id,
    resource: 'llm',
    slots: 8,
    busy: 0,
    steps_succeeded: 0,
    steps_failed_dependency: 0,
    at: new Date(0).toISOString(),
    ...(calls === undefined
      ? {}
      : {
          llm: {
            limit: limit ?? 4,
            in_flight: 0,
            waiting: 0,
            calls,
            rate_limited: limited ?? 0,
            failed: 0,
            latency_p95_ms: 0,
          },
        }),
    ...rest,
  };
}

describe('ExecutorReports', () => {
  it('sums the slots of live executors per resource and forgets silent ones', () => {
    const reports = new ExecutorReports(10_000, 3_000);
    reports.add(report('a', { busy: 8 }), 0);
    reports.add(report('b', { busy: 2 }), 1_000);
    reports.add(report('c', { resource: 'browser', busy: 1, slots: 2 }), 1_000);
    assert.deepEqual(
      reports.loads(2_000).sort((x, y) => x.resource.localeCompare(y.resource)),
      [
        { resource: 'browser', busy: 1, slots: 2, executors: 1 },
        { resource: 'llm', busy: 10, slots: 16, executors: 2 },
      ],
    );
    // `a` reported last at 0: silent for more than 3 s at 3 500, so its slots are gone.
    assert.deepEqual(
      reports.loads(3_500).find((load) => load.resource === 'llm'),
      { resource: 'llm', busy: 2, slots: 8, executors: 1 },
    );
  });

  it('measures 429s over the window from cumulative counters', () => {
    const reports = new ExecutorReports(10_000, 5_000);
    reports.add(report('a', { calls: 100, limited: 50, limit: 3 }), 0);
    reports.add(report('a', { calls: 110, limited: 51, limit: 4 }), 11_000);
    reports.add(report('a', { calls: 120, limited: 51, limit: 5 }), 12_000);
    // The base is the newest report at or before the window's start (t = 2 000): the one at 0.
    assert.deepEqual(reports.llmPressure(12_000), [
      { resource: 'llm', calls: 20, rateLimited: 1, limit: 5 },
    ]);
    reports.add(report('a', { calls: 130, limited: 51, limit: 6 }), 21_500);
    // Now the one at 11 000 is old enough to be the base, and the one at 0 is dropped.
    assert.deepEqual(reports.llmPressure(21_500), [
      { resource: 'llm', calls: 20, rateLimited: 0, limit: 6 },
    ]);
  });

  it('hands each step outcome to the breakers once', () => {
    const reports = new ExecutorReports(10_000, 5_000);
    // Each executor reports its zeros as it starts (governor-report.ts).
    reports.add(report('a', { resource: 'tool:x' }), 0);
    reports.add(report('b', { resource: 'tool:x' }), 0);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 3, steps_failed_dependency: 1 }),
      500,
    );
    reports.add(report('b', { resource: 'tool:x', steps_failed_dependency: 2 }), 500);
    assert.deepEqual([...reports.takeOutcomes(500)], [['tool:x', { succeeded: 3, failed: 3 }]]);
    assert.deepEqual([...reports.takeOutcomes(500)], []);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 5, steps_failed_dependency: 1 }),
      1_000,
    );
    assert.deepEqual([...reports.takeOutcomes(1_000)], [['tool:x', { succeeded: 2, failed: 0 }]]);
  });
});

describe('ExecutorReports outcomes across a gap', () => {
  it('does not hand out again what an executor it forgot had reported', () => {
    const reports = new ExecutorReports(10_000, 3_000);
    reports.add(report('a', { resource: 'tool:x' }), 0);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 5, steps_failed_dependency: 5 }),
      1_000,
    );
    assert.deepEqual([...reports.takeOutcomes(1_000)], [['tool:x', { succeeded: 5, failed: 5 }]]);
    // Its reports were lost for a while (a NATS reconnect): forgotten as dead at 4 500.
    assert.deepEqual(reports.loads(4_500), []);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 6, steps_failed_dependency: 5 }),
      5_000,
    );
    assert.deepEqual([...reports.takeOutcomes(5_000)], [], 'its old counters are not new outcomes');
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 8, steps_failed_dependency: 6 }),
      6_000,
    );
    assert.deepEqual([...reports.takeOutcomes(6_000)], [['tool:x', { succeeded: 2, failed: 1 }]]);
  });

  it('counts from the first report it sees, not from the executor’s start', () => {
    // A governor that starts (or takes over as leader) beside executors that ran for an hour: their
    // counters hold outcomes the previous governor fed to the breakers already.
    const reports = new ExecutorReports(10_000, 3_000);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 20, steps_failed_dependency: 30 }),
      0,
    );
    assert.deepEqual([...reports.takeOutcomes(0)], []);
    reports.add(
      report('a', { resource: 'tool:x', steps_succeeded: 21, steps_failed_dependency: 30 }),
      1_000,
    );
    assert.deepEqual([...reports.takeOutcomes(1_000)], [['tool:x', { succeeded: 1, failed: 0 }]]);
  });

  it('hands a standby that takes over no outcomes older than the window', () => {
    const reports = new ExecutorReports(10_000, 3_000);
    // A standby only listens: nobody takes outcomes for a minute.
    for (let second = 0; second <= 60; second++) {
      reports.add(
        report('a', {
          resource: 'tool:x',
          steps_succeeded: 10 * second,
          steps_failed_dependency: second < 30 ? second : 30,
        }),
        second * 1_000,
      );
    }
    const taken = reports.takeOutcomes(60_000).get('tool:x');
    assert.ok(taken, 'the window’s outcomes');
    assert.ok(taken.succeeded <= 110, `at most a window of successes (${taken.succeeded})`);
    assert.equal(taken.failed, 0, 'the failures of half a minute ago were fed by the old leader');
  });
});

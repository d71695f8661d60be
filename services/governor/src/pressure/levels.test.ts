import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDecision } from '@sluice/bus';
import { composeDecision } from '../compose-decision.js';
import { PressureBook, type Reading } from './levels.js';
import { DEFAULT_THRESHOLDS, parseThresholds, type ThresholdTable } from './thresholds.js';

const table = (overrides: string): ThresholdTable => {
  const parsed = parseThresholds(overrides);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
};

describe('PressureBook', () => {
  it('applies every action of the levels a signal has, up to its level', () => {
    const book = new PressureBook(DEFAULT_THRESHOLDS);
    const assessed = book.assess([{ signal: 'llm_rate_limit', scope: 'llm', value: 0.35 }], 0);
    assert.equal(assessed[0]?.level, 'hold_p3');
    const actions = book.actions(assessed);
    assert.equal(actions.level, 'hold_p3');
    assert.deepEqual(actions.holds, [3]);
    assert.deepEqual(actions.throttle, [2], 'P3 is held, so not listed as throttled');
    assert.deepEqual(actions.degrade, [2, 3]);
    assert.deepEqual(actions.reject, []);
    assert.match(actions.reasons[0] ?? '', /llm_rate_limit llm = 0.350 → hold p3/);
  });

  it('never holds on queue depth, so a deep queue cannot keep itself deep', () => {
    const book = new PressureBook(DEFAULT_THRESHOLDS);
    const actions = book.actions(
      book.assess([{ signal: 'queue_depth', scope: 'all', value: 100_000 }], 0),
    );
    assert.equal(actions.level, 'reject');
    assert.deepEqual(actions.holds, []);
    assert.deepEqual(actions.reject, [2, 3]);
    assert.deepEqual(actions.throttle, [], 'nor slows down the admission of what is queued');
    assert.equal(actions.rejectOverload, 2);
  });

  it('leaves P0 and P1 alone at every level', () => {
    const book = new PressureBook(DEFAULT_THRESHOLDS);
    const readings: Reading[] = [
      { signal: 'db_connection_usage', scope: 'server', value: 1 },
      { signal: 'queue_depth', scope: 'all', value: 1e9 },
      { signal: 'llm_rate_limit', scope: 'llm', value: 1 },
      { signal: 'p95_task_latency', scope: 'P0', value: 1e9 },
      { signal: 'retry_storm', scope: 'all', value: 1 },
    ];
    const actions = book.actions(book.assess(readings, 0));
    for (const list of [actions.holds, actions.reject, actions.throttle, actions.degrade]) {
      assert.ok(
        list.every((p) => p >= 2),
        `P0/P1 affected: ${JSON.stringify(list)}`,
      );
    }
  });

  it('keeps a level through its dwell time and in the band, then steps down', () => {
    const book = new PressureBook(
      table('{"retry_storm":[{"level":"throttle","enter":0.5,"exit":0.2,"dwell_ms":1000}]}'),
    );
    const at = (value: number, ms: number) =>
      book.assess([{ signal: 'retry_storm', scope: 'all', value }], ms)[0]?.level;
    assert.equal(at(0.6, 0), 'throttle');
    assert.equal(at(0.1, 500), 'throttle', 'within the dwell');
    assert.equal(at(0.3, 2_000), 'throttle', 'inside the band');
    assert.equal(at(Number.NaN, 3_000), 'throttle', 'no reading keeps the level');
    assert.equal(at(0.1, 3_000), 'normal');
  });

  it('rejects with a usable retry delay while a rejecting signal has nothing to measure', () => {
    // P0 steps wait and none starts: the P0 wait reads NaN and keeps its level (here reject).
    const book = new PressureBook(
      table('{"p95_task_latency":[{"level":"reject","enter":10000,"exit":5000}]}'),
    );
    const at = (value: number, ms: number) =>
      book.actions(book.assess([{ signal: 'p95_task_latency', scope: 'P0', value }], ms));
    assert.equal(at(20_000, 0).rejectOverload, 2);
    assert.equal(at(Number.NaN, 1_000).level, 'reject', 'no reading keeps the level');
    // A level kept without any value measured (a reading of nothing as such).
    const stuck = book.actions([
      { signal: 'p95_task_latency', scope: 'P0', value: Number.NaN, level: 'reject' },
    ]);
    assert.deepEqual(stuck.reject, [2, 3]);
    assert.ok(Number.isFinite(stuck.rejectOverload), `overload ${stuck.rejectOverload}`);
    const decision = composeDecision({
      epoch: 1,
      holder: 'g',
      at: new Date(0),
      actions: stuck,
      readings: [],
      breakers: {},
      halfOpenProbes: 1,
      adaptiveLimits: {},
      overrides: [],
      retryAfterBaseMs: 5_000,
    });
    assert.equal(decision.retry_after_ms, 5_000, 'the delay at the threshold');
    assert.deepEqual(parseDecision(decision), decision, 'a document the services can read');
  });

  it('publishes a level kept by a reading of nothing, so the next leader resumes it', () => {
    // P0 steps wait and none starts: the P0 wait reads NaN and keeps its hold of P2 and P3.
    const book = new PressureBook(DEFAULT_THRESHOLDS);
    book.assess([{ signal: 'p95_task_latency', scope: 'P0', value: 20_000 }], 0);
    const assessed = book.assess([{ signal: 'p95_task_latency', scope: 'P0', value: NaN }], 1_000);
    assert.deepEqual(assessed, [
      { signal: 'p95_task_latency', scope: 'P0', value: 20_000, level: 'hold_p2' },
    ]);
    const decision = composeDecision({
      epoch: 1,
      holder: 'g',
      at: new Date(0),
      actions: book.actions(assessed),
      readings: assessed,
      breakers: {},
      halfOpenProbes: 1,
      adaptiveLimits: {},
      overrides: [],
      retryAfterBaseMs: 5_000,
    });
    assert.deepEqual(decision.holds, [2, 3]);
    const next = new PressureBook(DEFAULT_THRESHOLDS);
    next.seed(parseDecision(decision).signals ?? [], 2_000);
    const resumed = next.assess([{ signal: 'p95_task_latency', scope: 'P0', value: NaN }], 3_000);
    assert.deepEqual(next.actions(resumed).holds, [2, 3], 'the next leader keeps the hold');
    assert.equal(resumed[0]?.value, 20_000, 'and publishes it again');
  });

  it('tracks each scope of a signal on its own', () => {
    const book = new PressureBook(DEFAULT_THRESHOLDS);
    const assessed = book.assess(
      [
        { signal: 'worker_busy_ratio', scope: 'llm', value: 1 },
        { signal: 'worker_busy_ratio', scope: 'browser', value: 0.1 },
      ],
      0,
    );
    assert.deepEqual(
      assessed.map((r) => r.level),
      ['throttle', 'normal'],
    );
  });
});

/** The problem `parseThresholds` reported (a table instead fails the match). */
const problemOf = (result: ThresholdTable | string): string =>
  typeof result === 'string' ? result : 'a table';

describe('parseThresholds', () => {
  it('uses the defaults when unset and replaces only the signals given', () => {
    assert.equal(parseThresholds(undefined), DEFAULT_THRESHOLDS);
    const parsed = table('{"queue_depth":[{"level":"reject","enter":10,"exit":5,"dwell_ms":0}]}');
    assert.deepEqual(parsed.queue_depth.thresholds, [
      { level: 'reject', enterAt: 10, exitAt: 5, minDwellMs: 0 },
    ]);
    assert.equal(parsed.llm_rate_limit, DEFAULT_THRESHOLDS.llm_rate_limit);
  });

  it('explains what is wrong', () => {
    assert.match(problemOf(parseThresholds('{')), /not JSON/);
    assert.match(problemOf(parseThresholds('[]')), /object keyed by signal/);
    assert.match(problemOf(parseThresholds('{"cpu":[]}')), /unknown signal "cpu"/);
    assert.match(
      problemOf(parseThresholds('{"queue_depth":[{"level":"reject","enter":1,"exit":5}]}')),
      /exitAt must not be above enterAt/,
    );
    assert.match(
      problemOf(parseThresholds('{"queue_depth":[{"level":"panic","enter":5,"exit":1}]}')),
      /unknown level/,
    );
    assert.match(problemOf(parseThresholds('{"queue_depth":[{"enter":5}]}')), /needs a level/);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_ADAPTIVE_LIMIT,
  adaptiveLimitProblem,
  concurrencyOf,
  initialAdaptiveLimit,
  observe,
  type AdaptiveLimitConfig,
  type AdaptiveLimitSample,
  type AdaptiveLimitState,
} from './adaptive-limit.js';

const config: AdaptiveLimitConfig = {
  minLimit: 1,
  maxLimit: 50,
  initialLimit: 4,
  backoffRatio: 0.5,
  latencyTolerance: 2,
  latencyStrikes: 3,
  baselineDrift: 0,
  decreaseIntervalMs: 1_000,
};

const ok = (atMs: number, inFlight: number, latencyMs = 100): AdaptiveLimitSample => ({
  atMs,
  outcome: 'ok',
  latencyMs,
  inFlight,
});
const limited = (atMs: number): AdaptiveLimitSample => ({
  atMs,
  outcome: 'rate_limited',
  inFlight: 4,
});

function replay(samples: readonly AdaptiveLimitSample[], cfg = config): AdaptiveLimitState {
  return samples.reduce((state, sample) => observe(state, sample, cfg), initialAdaptiveLimit(cfg));
}

describe('adaptive limit: sequences', () => {
  const table: Array<[string, AdaptiveLimitSample[], number]> = [
    ['4 successes at full use: +1', [ok(0, 4), ok(1, 4), ok(2, 4), ok(3, 4)], 5],
    ['3 successes: not yet', [ok(0, 4), ok(1, 4), ok(2, 4)], 4],
    ['under half in use: no increase', [ok(0, 1), ok(1, 1), ok(2, 1), ok(3, 1)], 4],
    ['a 429 halves', [limited(0)], 2],
    ['429s of one burst: one decrease', [limited(0), limited(10), limited(999)], 2],
    ['429s a window apart: two decreases', [limited(0), limited(1_000)], 1],
    ['never below the minimum', [limited(0), limited(1_000), limited(2_000), limited(3_000)], 1],
    ['timeouts count as drops', [{ atMs: 0, outcome: 'timeout', inFlight: 4 }], 2],
    [
      'other errors are ignored',
      [{ atMs: 0, outcome: 'error', inFlight: 4 }, ok(1, 4), ok(2, 4), ok(3, 4), ok(4, 4)],
      5,
    ],
    [
      'one slow outlier: no decrease',
      [ok(0, 1, 100), ok(1, 1, 900), ok(2, 1, 100), ok(3, 1, 900), ok(4, 1, 900)],
      4,
    ],
    [
      'three consecutive slow answers: a decrease',
      [ok(0, 4, 100), ok(1, 4, 900), ok(2, 4, 900), ok(3, 4, 900)],
      2,
    ],
    [
      'slow within tolerance: no strike',
      [ok(0, 1, 100), ok(1, 1, 199), ok(2, 1, 199), ok(3, 1, 199)],
      4,
    ],
  ];
  for (const [name, samples, expected] of table) {
    it(name, () => assert.equal(replay(samples).limit, expected));
  }

  it('an increase needs limit-many successes after a 429 resets the count', () => {
    const state = replay([
      ...[0, 1, 2].map((at) => ok(at, 4)),
      limited(3),
      ...[1_003, 1_004].map((at) => ok(at, 2)),
    ]);
    assert.equal(state.limit, 3);
  });

  it('decreases from what was in flight, not from a limit that grew meanwhile', () => {
    const raised = { ...initialAdaptiveLimit(config), limit: 10 };
    const after = observe(raised, { atMs: 0, outcome: 'rate_limited', inFlight: 6 }, config);
    assert.equal(after.limit, 3);
  });

  it('successes right after a drop do not count', () => {
    const state = replay([limited(0), ...[1, 2, 3, 4, 5, 6].map((at) => ok(at, 2))]);
    assert.equal(state.limit, 2);
  });

  it('never above the maximum', () => {
    const samples = Array.from({ length: 400 }, (_, i) => ok(i, 60));
    assert.equal(replay(samples, { ...config, maxLimit: 8 }).limit, 8);
  });

  it('the baseline drifts up to a provider that became slower for good', () => {
    const drifting = { ...config, baselineDrift: 0.2, latencyStrikes: 1_000 };
    const state = replay(
      [ok(0, 1, 100), ...Array.from({ length: 50 }, (_, i) => ok(i + 1, 1, 400))],
      drifting,
    );
    assert.ok(state.baselineMs !== null && state.baselineMs > 350, `${state.baselineMs}`);
  });

  it('concurrencyOf rounds down', () => {
    assert.equal(concurrencyOf({ ...initialAdaptiveLimit(config), limit: 3.9 }, config), 3);
  });
});

/**
 * A provider with a hidden concurrency limit: per round every slot the limit allows makes a call,
 * calls above the hidden limit are answered 429, answers arrive in a random order.
 */
function simulate(
  hidden: number,
  cfg: AdaptiveLimitConfig,
  rounds: number,
  seed: number,
): { concurrency: number[]; calls: number[]; rejected: number[] } {
  let random = seed >>> 0 || 1;
  const next = (): number => {
    random = (Math.imul(random, 1_664_525) + 1_013_904_223) >>> 0;
    return random / 2 ** 32;
  };
  let state = initialAdaptiveLimit(cfg);
  const concurrency: number[] = [];
  const calls: number[] = [];
  const rejected: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const c = concurrencyOf(state, cfg);
    concurrency.push(c);
    calls.push(c);
    rejected.push(Math.max(0, c - hidden));
    // Which calls the provider refuses: those above its hidden limit, answered in random order.
    const outcomes = Array.from({ length: c }, (_, i) => i < hidden);
    for (let i = outcomes.length - 1; i > 0; i -= 1) {
      const j = Math.floor(next() * (i + 1));
      [outcomes[i], outcomes[j]] = [outcomes[j] === true, outcomes[i] === true];
    }
    outcomes.forEach((outcome, i) => {
      const atMs = round * 1_000 + i;
      state = observe(
        state,
        outcome
          ? { atMs, outcome: 'ok', latencyMs: 100, inFlight: c }
          : { atMs, outcome: 'rate_limited', inFlight: c },
        cfg,
      );
    });
  }
  return { concurrency, calls, rejected };
}

describe('adaptive limit: hidden-limit simulation', () => {
  it('settles in a band around the hidden limit with few 429s', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 3, max: 60 }),
        fc.integer({ min: 1, max: 100 }),
        fc.constantFrom(0.5, 0.7, 0.9),
        fc.integer(),
        (hidden, initialLimit, backoffRatio, seed) => {
          const cfg = { ...DEFAULT_ADAPTIVE_LIMIT, maxLimit: 200, initialLimit, backoffRatio };
          const { concurrency, calls, rejected } = simulate(hidden, cfg, 300, seed);
          const settled = concurrency.slice(150);
          const low = Math.floor(hidden * backoffRatio) - 1;
          for (const c of settled) {
            assert.ok(c >= low && c <= hidden + 1, `limit ${c}, hidden ${hidden}`);
          }
          const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
          const share = sum(rejected.slice(150)) / sum(calls.slice(150));
          // Each overshoot is by one call: at small limits that one call is a large share.
          const bound = hidden >= 10 ? 0.1 : 1 / (hidden + 1);
          assert.ok(share <= bound, `429 share ${share.toFixed(3)} with hidden ${hidden}`);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('the simulation can fail: a fixed limit above the hidden one is out of band', () => {
    const fixed = { ...DEFAULT_ADAPTIVE_LIMIT, initialLimit: 30, minLimit: 30, maxLimit: 30 };
    const { concurrency, rejected } = simulate(10, fixed, 50, 1);
    assert.ok(concurrency.every((c) => c === 30));
    assert.ok(rejected.every((r) => r === 20));
  });
});

describe('adaptiveLimitProblem', () => {
  it('accepts the defaults', () =>
    assert.equal(adaptiveLimitProblem(DEFAULT_ADAPTIVE_LIMIT), undefined));
  const bad: Array<[string, Partial<AdaptiveLimitConfig>]> = [
    ['minLimit 0', { minLimit: 0 }],
    ['max under min', { minLimit: 5, maxLimit: 4 }],
    ['backoffRatio 1', { backoffRatio: 1 }],
    ['tolerance 1', { latencyTolerance: 1 }],
    ['strikes 0', { latencyStrikes: 0 }],
    ['drift 1', { baselineDrift: 1 }],
  ];
  for (const [name, change] of bad) {
    it(`rejects ${name}`, () =>
      assert.equal(
        typeof adaptiveLimitProblem({ ...DEFAULT_ADAPTIVE_LIMIT, ...change }),
        'string',
      ));
  }
});

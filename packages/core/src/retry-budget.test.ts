import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_RETRY_BUDGET,
  placeRetry,
  retriesAllowed,
  retryBudgetProblem,
  windowOf,
  type RetryBudgetConfig,
  type RetryPlacement,
} from './retry-budget.js';

/** 20 % of attempts over 1 s windows, a floor of 2 retries per second, pushed 5 s at most. */
const config: RetryBudgetConfig = {
  ratio: 0.2,
  windowMs: 1_000,
  minRetriesPerSecond: 2,
  maxDeferMs: 5_000,
};

function place(
  dueAt: number,
  attemptsInWindow: number,
  placed: Readonly<Record<number, number>>,
  random = 0.5,
  budget = config,
): RetryPlacement {
  return placeRetry({
    dueAt,
    attemptsInWindow,
    retriesIn: (window) => placed[window] ?? 0,
    random,
    config: budget,
  });
}

describe('retriesAllowed', () => {
  const table: Array<[string, number, number]> = [
    ['quiet resource: the floor', retriesAllowed(0, config), 2],
    ['20 % of 50 attempts plus the floor', retriesAllowed(50, config), 12],
    ['rounded down', retriesAllowed(9, config), 3],
    ['the references’ defaults: 10/s over 10 s', retriesAllowed(0, DEFAULT_RETRY_BUDGET), 100],
    ['defaults with 1 000 attempts', retriesAllowed(1_000, DEFAULT_RETRY_BUDGET), 300],
  ];
  for (const [name, actual, expected] of table) it(name, () => assert.equal(actual, expected));
});

describe('placeRetry', () => {
  const table: Array<[string, RetryPlacement, RetryPlacement]> = [
    [
      'room in its window: at the backoff time',
      place(10_250, 0, { 10: 1 }),
      { dueAt: 10_250, deferredMs: 0, window: 10 },
    ],
    [
      'window full: spread over the next window with room',
      place(10_250, 0, { 10: 2 }),
      { dueAt: 11_500, deferredMs: 1_250, window: 11 },
    ],
    [
      'several full windows skipped',
      place(10_250, 0, { 10: 2, 11: 2, 12: 5 }, 0),
      { dueAt: 13_000, deferredMs: 2_750, window: 13 },
    ],
    [
      'more attempts, more room',
      place(10_250, 50, { 10: 11 }),
      { dueAt: 10_250, deferredMs: 0, window: 10 },
    ],
    [
      'no room within the bound: due at the bound anyway',
      place(10_250, 0, { 10: 2, 11: 2, 12: 2, 13: 2, 14: 2, 15: 2 }),
      { dueAt: 15_250, deferredMs: 5_000, window: 15 },
    ],
    [
      'the spread never passes the bound',
      place(10_250, 0, { 10: 2, 11: 2, 12: 2, 13: 2, 14: 2 }, 0.9),
      { dueAt: 15_250, deferredMs: 5_000, window: 15 },
    ],
    [
      'no floor and no attempts: no room, bounded',
      place(10_250, 0, {}, 0.5, { ...config, minRetriesPerSecond: 0 }),
      { dueAt: 15_250, deferredMs: 5_000, window: 15 },
    ],
  ];
  for (const [name, actual, expected] of table) it(name, () => assert.deepEqual(actual, expected));

  it('spreads a burst: each window takes what the budget allows', () => {
    const placed: Record<number, number> = {};
    const dues: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const placement = place(10_000, 0, placed, i / 10);
      placed[placement.window] = (placed[placement.window] ?? 0) + 1;
      dues.push(placement.dueAt);
    }
    assert.deepEqual(placed, { 10: 2, 11: 2, 12: 2, 13: 2, 14: 2 });
    assert.ok(dues.every((due) => due >= 10_000 && due <= 15_000));
    assert.equal(windowOf(dues.at(-1) ?? 0, config), 14);
  });
});

describe('retryBudgetProblem', () => {
  const table: Array<[string, RetryBudgetConfig, string | undefined]> = [
    ['defaults', DEFAULT_RETRY_BUDGET, undefined],
    ['negative ratio', { ...config, ratio: -0.1 }, 'ratio must be 0 or more'],
    ['zero window', { ...config, windowMs: 0 }, 'windowMs must be a positive integer'],
    [
      'negative floor',
      { ...config, minRetriesPerSecond: -1 },
      'minRetriesPerSecond must be 0 or more',
    ],
    [
      'fractional bound',
      { ...config, maxDeferMs: 1.5 },
      'maxDeferMs must be a whole number of 0 or more',
    ],
  ];
  for (const [name, budget, expected] of table) {
    it(name, () => assert.equal(retryBudgetProblem(budget), expected));
  }
});

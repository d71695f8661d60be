import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  applyRateLimitHeaders,
  correct,
  newLlmBudget,
  refill,
  take,
  type LlmBudget,
  type TakeDecision,
} from './token-bucket.js';

/** 60 requests and 6 000 tokens a minute: one request and 100 tokens a second. */
const fresh = (): LlmBudget => newLlmBudget({ requestsPerMinute: 60, tokensPerMinute: 6_000 }, 0);

function admitted(decision: TakeDecision): LlmBudget {
  assert.equal(decision.admitted, true, JSON.stringify(decision));
  return decision.budget;
}

function waitOf(decision: TakeDecision): number {
  assert.equal(decision.admitted, false, JSON.stringify(decision));
  return decision.admitted ? 0 : decision.waitMs;
}

describe('take', () => {
  it('charges both buckets', () => {
    const budget = admitted(take(fresh(), { tokens: 1_000 }, 0));
    assert.equal(budget.requests.level, 59);
    assert.equal(budget.tokens.level, 5_000);
  });

  const table: Array<[string, (b: LlmBudget) => TakeDecision, number]> = [
    [
      'tokens short by 500: 5 s',
      (b) => take({ ...b, tokens: { ...b.tokens, level: 5_500 } }, { tokens: 6_000 }, 0),
      5_000,
    ],
    [
      'requests exhausted: 1 s',
      (b) => take({ ...b, requests: { ...b.requests, level: 0 } }, { tokens: 1 }, 0),
      1_000,
    ],
    [
      'the longer of the two waits',
      (b) =>
        take(
          { ...b, requests: { ...b.requests, level: 0 }, tokens: { ...b.tokens, level: 0 } },
          { tokens: 300 },
          0,
        ),
      3_000,
    ],
    [
      'a pause holds everything',
      (b) => take({ ...b, pausedUntilMs: 7_000 }, { tokens: 1 }, 0),
      7_000,
    ],
    [
      'a debt is repaid first',
      (b) => take({ ...b, tokens: { ...b.tokens, level: -200 } }, { tokens: 100 }, 0),
      3_000,
    ],
  ];
  for (const [name, decide, expected] of table) {
    it(name, () => assert.equal(waitOf(decide(fresh())), expected));
  }

  it('a call bigger than the bucket is admitted when it is full, leaving a debt', () => {
    const budget = admitted(take(fresh(), { tokens: 9_000 }, 0));
    assert.equal(budget.tokens.level, -3_000);
    assert.equal(waitOf(take(budget, { tokens: 1 }, 0)), 30_010);
  });

  it('after the wait it says, the call is admitted', () => {
    const drained = admitted(take(fresh(), { tokens: 5_950 }, 0));
    const wait = waitOf(take(drained, { tokens: 400 }, 1_000));
    assert.equal(wait, 2_500);
    admitted(take(drained, { tokens: 400 }, 1_000 + wait));
    waitOf(take(drained, { tokens: 400 }, 1_000 + wait - 1));
  });

  it('refill stops at capacity and ignores time going backwards', () => {
    const drained = admitted(take(fresh(), { tokens: 6_000 }, 10_000));
    assert.equal(refill(drained.tokens, 1_000_000).level, 6_000);
    assert.equal(refill(drained.tokens, 5_000).level, 0);
  });

  it('never admits more than a bucket plus its refill over any stretch', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 5_000 }),
            tokens: fc.integer({ min: 1, max: 6_000 }),
          }),
          { minLength: 1, maxLength: 200 },
        ),
        (calls) => {
          let budget = fresh();
          let now = 0;
          let tokens = 0;
          let requests = 0;
          for (const call of calls) {
            now += call.gapMs;
            const decision = take(budget, { tokens: call.tokens }, now);
            budget = decision.budget;
            if (decision.admitted) {
              tokens += call.tokens;
              requests += 1;
            }
          }
          assert.ok(tokens <= 6_000 + (now * 6_000) / 60_000, `${tokens} tokens by ${now} ms`);
          assert.ok(requests <= 60 + (now * 60) / 60_000, `${requests} requests by ${now} ms`);
        },
      ),
    );
  });
});

describe('correct', () => {
  const table: Array<[string, number, number, number]> = [
    ['used fewer: the rest comes back', 1_000, 400, 5_600],
    ['used more: charged the difference', 1_000, 1_500, 4_500],
    ['exactly as declared: unchanged', 1_000, 1_000, 5_000],
    ['never above capacity', 1_000, -5_000, 6_000],
    ['far more: a debt', 1_000, 12_000, -6_000],
  ];
  for (const [name, declared, actual, expected] of table) {
    it(name, () => {
      const charged = admitted(take(fresh(), { tokens: declared }, 0));
      assert.equal(correct(charged, declared, actual).tokens.level, expected);
    });
  }
});

describe('applyRateLimitHeaders', () => {
  it('remaining counts replace ours, up or down, within capacity', () => {
    const charged = admitted(take(fresh(), { tokens: 3_000 }, 0));
    const lower = applyRateLimitHeaders(
      charged,
      { remainingRequests: 10, remainingTokens: 500 },
      0,
    );
    assert.equal(lower.requests.level, 10);
    assert.equal(lower.tokens.level, 500);
    const higher = applyRateLimitHeaders(charged, { remainingTokens: 99_999 }, 0);
    assert.equal(higher.tokens.level, 6_000);
    assert.equal(higher.requests.level, 59);
  });

  it('retry-after pauses admission', () => {
    const paused = applyRateLimitHeaders(fresh(), { retryAfterMs: 20_000 }, 1_000);
    assert.equal(waitOf(take(paused, { tokens: 1 }, 1_000)), 20_000);
    admitted(take(paused, { tokens: 1 }, 21_000));
  });

  it('an exhausted limit pauses until its reset; a reset alone does not', () => {
    const exhausted = applyRateLimitHeaders(fresh(), { remainingRequests: 0, resetMs: 4_000 }, 0);
    assert.equal(exhausted.pausedUntilMs, 4_000);
    const notExhausted = applyRateLimitHeaders(
      fresh(),
      { remainingRequests: 3, resetMs: 4_000 },
      0,
    );
    assert.equal(notExhausted.pausedUntilMs, 0);
  });

  it('a pause is never shortened by a later, shorter one', () => {
    const long = applyRateLimitHeaders(fresh(), { retryAfterMs: 30_000 }, 0);
    assert.equal(applyRateLimitHeaders(long, { retryAfterMs: 1_000 }, 1_000).pausedUntilMs, 30_000);
  });

  it('ignores values that are not counts', () => {
    const same = applyRateLimitHeaders(
      fresh(),
      { remainingTokens: Number.NaN, retryAfterMs: -5 },
      0,
    );
    assert.deepEqual(same, fresh());
  });
});

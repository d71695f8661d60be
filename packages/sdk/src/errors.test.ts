import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HttpStatusError, parseRetryAfter } from './errors.js';

function answer(status: number, headers: Record<string, string>): Response {
  return new Response(null, { status, headers });
}

describe('HttpStatusError.fromResponse', () => {
  it('takes the delay an OpenAI-style 429 gives only as retry-after-ms', () => {
    // Without it the step's retry ignored the provider's delay and could come at once.
    const error = HttpStatusError.fromResponse(
      answer(429, { 'retry-after-ms': '1500' }),
      'the LLM endpoint',
    );
    assert.deepEqual(
      { status: error.status, message: error.message, retryAfterMs: error.retryAfterMs },
      { status: 429, message: 'the LLM endpoint answered HTTP 429', retryAfterMs: 1_500 },
    );
  });

  it('prefers retry-after-ms to the rounded retry-after, and falls back when it is unusable', () => {
    const both = answer(429, { 'retry-after-ms': '2500', 'retry-after': '3' });
    assert.equal(HttpStatusError.fromResponse(both, 'x').retryAfterMs, 2_500);
    for (const broken of ['soon', '-1', ' ']) {
      const fallback = answer(429, { 'retry-after-ms': broken, 'retry-after': '3' });
      assert.equal(HttpStatusError.fromResponse(fallback, 'x').retryAfterMs, 3_000, broken);
    }
    assert.equal(HttpStatusError.fromResponse(answer(503, {}), 'x').retryAfterMs, undefined);
  });
});

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP dates', () => {
    assert.equal(parseRetryAfter('2'), 2_000);
    assert.equal(parseRetryAfter('Thu, 01 Jan 1970 00:00:05 GMT', 1_000), 4_000);
    assert.equal(parseRetryAfter('-1'), undefined);
    assert.equal(parseRetryAfter(null), undefined);
  });
});

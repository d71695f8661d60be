import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorClass } from './errors.js';
import { MAX_RETRY_AFTER_MS, decideRetry, type RetryDecision } from './retry-policy.js';

function ask(
  errorClass: ErrorClass,
  attempts: number,
  options: {
    retryable?: boolean;
    retryAfterMs?: number;
    maxAttempts?: number;
    random?: number;
  } = {},
): RetryDecision {
  return decideRetry({
    error: {
      errorClass,
      message: 'x',
      retryable: options.retryable ?? true,
      ...(options.retryAfterMs === undefined ? {} : { retryAfterMs: options.retryAfterMs }),
    },
    attempts,
    maxAttempts: options.maxAttempts ?? 5,
    random: options.random ?? 0.5,
  });
}

describe('decideRetry', () => {
  const table: Array<[string, RetryDecision, RetryDecision]> = [
    ['5xx, first failure: half of 1 s', ask('external_5xx', 1), { retry: true, delayMs: 500 }],
    ['5xx, third failure: half of 4 s', ask('external_5xx', 3), { retry: true, delayMs: 2_000 }],
    [
      '5xx, capped at 60 s',
      ask('external_5xx', 4, { maxAttempts: 20, random: 0.999 }),
      { retry: true, delayMs: 7_992 },
    ],
    [
      '5xx, late attempt: the cap',
      ask('external_5xx', 12, { maxAttempts: 20, random: 0.5 }),
      { retry: true, delayMs: 30_000 },
    ],
    [
      '429 honours Retry-After',
      ask('llm_rate_limit', 1, { retryAfterMs: 7_000 }),
      { retry: true, delayMs: 7_000 },
    ],
    [
      '429 keeps a longer backoff',
      ask('llm_rate_limit', 3, { retryAfterMs: 100, random: 0.99 }),
      { retry: true, delayMs: 7_920 },
    ],
    [
      'Retry-After is bounded',
      ask('llm_rate_limit', 1, { retryAfterMs: 10 * MAX_RETRY_AFTER_MS }),
      { retry: true, delayMs: MAX_RETRY_AFTER_MS },
    ],
    ['timeout', ask('tool_timeout', 2), { retry: true, delayMs: 1_000 }],
    ['unknown', ask('unknown', 1, { random: 0 }), { retry: true, delayMs: 0 }],
    ['attempts exhausted', ask('external_5xx', 5), { retry: false, reason: 'attempts_exhausted' }],
    [
      'a single attempt allowed',
      ask('external_5xx', 1, { maxAttempts: 1 }),
      { retry: false, reason: 'attempts_exhausted' },
    ],
    [
      'permission denied: never',
      ask('permission_denied', 1),
      { retry: false, reason: 'not_retryable' },
    ],
    [
      'schema validation: never',
      ask('schema_validation', 1),
      { retry: false, reason: 'not_retryable' },
    ],
    [
      'approval timeout: never',
      ask('approval_timeout', 1),
      { retry: false, reason: 'not_retryable' },
    ],
    ['cancelled: never', ask('cancelled', 1), { retry: false, reason: 'not_retryable' }],
    [
      'an error marked not retryable',
      ask('unknown', 1, { retryable: false }),
      { retry: false, reason: 'not_retryable' },
    ],
  ];
  for (const [name, actual, expected] of table) {
    it(name, () => assert.deepEqual(actual, expected));
  }

  it('spreads delays over the whole jitter range', () => {
    const delays = [0, 0.25, 0.5, 0.75, 0.999].map((random) => ask('external_5xx', 3, { random }));
    assert.deepEqual(
      delays.map((d) => (d.retry ? d.delayMs : -1)),
      [0, 1_000, 2_000, 3_000, 3_996],
    );
  });
});

describe('decideRetry with a step backoff', () => {
  const error = { errorClass: 'external_5xx', message: 'x', retryable: true } as const;
  it('replaces the class backoff for the fields the step gives', () => {
    assert.deepEqual(
      decideRetry({
        error,
        attempts: 3,
        maxAttempts: 5,
        random: 0.5,
        backoff: { baseDelayMs: 100, maxDelayMs: 300 },
      }),
      { retry: true, delayMs: 150 },
      'min(300, 100 × 2²) × 0.5',
    );
    assert.deepEqual(
      decideRetry({
        error,
        attempts: 1,
        maxAttempts: 5,
        random: 0.5,
        backoff: { baseDelayMs: 40 },
      }),
      { retry: true, delayMs: 20 },
    );
  });

  it('still honours Retry-After above a short backoff', () => {
    assert.deepEqual(
      decideRetry({
        error: { ...error, errorClass: 'llm_rate_limit', retryAfterMs: 1_000 },
        attempts: 1,
        maxAttempts: 5,
        random: 0.9,
        backoff: { baseDelayMs: 100, maxDelayMs: 200 },
      }),
      { retry: true, delayMs: 1_000 },
    );
  });

  it('never makes a class retryable that is not', () => {
    assert.deepEqual(
      decideRetry({
        error: { errorClass: 'schema_validation', message: 'x', retryable: true },
        attempts: 1,
        maxAttempts: 5,
        random: 0.5,
        backoff: { baseDelayMs: 100, maxDelayMs: 200 },
      }),
      { retry: false, reason: 'not_retryable' },
    );
  });
});

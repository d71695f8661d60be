import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { isGrpcError } from '../grpc/index.js';
import { overrideTtlMs } from './pressure.js';

/** The message of the INVALID_ARGUMENT `overrideTtlMs` throws for `ttl`. */
function refusal(ttl: { seconds: string; nanos: number }): string {
  try {
    overrideTtlMs(ttl);
  } catch (error) {
    assert.ok(isGrpcError(error));
    assert.equal(error.code, status.INVALID_ARGUMENT);
    return error.details;
  }
  assert.fail(`a ttl of ${JSON.stringify(ttl)} was taken`);
}

describe("an override's ttl", () => {
  it('is taken in milliseconds, and absent when not given', () => {
    assert.equal(overrideTtlMs({ seconds: '90', nanos: 500_000_000 }), 90_500);
    assert.equal(overrideTtlMs(null), undefined);
  });

  it('is refused under a millisecond as such, not as a ttl that is not positive', () => {
    // The SDK sends whole milliseconds; another client may send 500 µs.
    assert.equal(refusal({ seconds: '0', nanos: 500_000 }), 'ttl: ttl must be at least 1 ms');
  });

  it('is refused with nanos of a second or more, which a Duration cannot hold', () => {
    // Read as 2 s: seconds 1 and 1,000,000,000 nanos is no Duration at all.
    assert.match(refusal({ seconds: '1', nanos: 1_000_000_000 }), /^ttl: ttl\.nanos must be/);
  });

  it('is refused when negative or zero', () => {
    for (const ttl of [
      { seconds: '-60', nanos: 0 },
      { seconds: '0', nanos: -1 },
      { seconds: '0', nanos: 0 },
    ]) {
      assert.equal(refusal(ttl), 'ttl: ttl must be positive');
    }
  });
});

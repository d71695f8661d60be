import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromTimestamp, toTimestamp } from './api-types.js';

describe('toTimestamp / fromTimestamp', () => {
  const cases: [string, { seconds: string; nanos: number }][] = [
    ['1970-01-01T00:00:00.000Z', { seconds: '0', nanos: 0 }],
    ['2026-01-02T03:04:05.678Z', { seconds: '1767323045', nanos: 678_000_000 }],
    ['1969-12-31T23:59:59.999Z', { seconds: '-1', nanos: 999_000_000 }],
  ];
  for (const [iso, timestamp] of cases) {
    it(`converts ${iso}`, () => {
      assert.deepEqual(toTimestamp(new Date(iso)), timestamp);
      assert.equal(fromTimestamp(timestamp).toISOString(), iso);
    });
  }

  it('rejects invalid input', () => {
    assert.throws(() => toTimestamp(new Date('nope')), RangeError);
    assert.throws(() => fromTimestamp({ seconds: 'x', nanos: 0 }), RangeError);
  });

  it("rejects times outside google.protobuf.Timestamp's range and nanos outside a second", () => {
    // Past the range a Date is invalid (2^53 - 1 seconds) or Postgres cannot store the time.
    for (const seconds of ['9007199254740991', '253402300800', '-62135596801', '-8000000000000']) {
      assert.throws(() => fromTimestamp({ seconds, nanos: 0 }), RangeError, seconds);
    }
    for (const nanos of [-1, 1_000_000_000, 0.5]) {
      assert.throws(() => fromTimestamp({ seconds: '0', nanos }), RangeError, String(nanos));
    }
    assert.equal(
      fromTimestamp({ seconds: '253402300799', nanos: 999_999_999 }).toISOString(),
      '9999-12-31T23:59:59.999Z',
    );
    assert.equal(
      fromTimestamp({ seconds: '-62135596800', nanos: 0 }).toISOString(),
      '0001-01-01T00:00:00.000Z',
    );
  });
});

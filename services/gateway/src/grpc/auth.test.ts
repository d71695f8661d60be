import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metadata } from '@grpc/grpc-js';
import { MAX_API_KEY_LENGTH, readBearerKey } from './auth.js';

function metadataWith(...values: (string | Buffer)[]): Metadata {
  const metadata = new Metadata();
  for (const value of values) {
    if (typeof value === 'string') metadata.add('authorization', value);
    else metadata.add('authorization-bin', value);
  }
  return metadata;
}

describe('readBearerKey', () => {
  const cases: [string, Metadata, string | undefined][] = [
    ['a bearer key', metadataWith('Bearer sk_live_abc123'), 'sk_live_abc123'],
    ['a case-insensitive scheme', metadataWith('bearer sk_1'), 'sk_1'],
    ['extra spaces', metadataWith('Bearer   sk_1  '), 'sk_1'],
    ['base64 padding', metadataWith('Bearer YWJj+/=='), 'YWJj+/=='],
    ['no metadata', new Metadata(), undefined],
    ['another scheme', metadataWith('Basic dXNlcjpwYXNz'), undefined],
    ['a bare key', metadataWith('sk_1'), undefined],
    ['an empty key', metadataWith('Bearer '), undefined],
    ['two keys in one value', metadataWith('Bearer a b'), undefined],
    ['two authorization values', metadataWith('Bearer a', 'Bearer b'), undefined],
    ['a binary header only', metadataWith(Buffer.from('Bearer a')), undefined],
    [
      'a key at the length limit',
      metadataWith(`Bearer ${'k'.repeat(MAX_API_KEY_LENGTH)}`),
      'k'.repeat(MAX_API_KEY_LENGTH),
    ],
    [
      'a key over the length limit',
      metadataWith(`Bearer ${'k'.repeat(MAX_API_KEY_LENGTH + 1)}`),
      undefined,
    ],
  ];
  for (const [name, metadata, expected] of cases) {
    it(`reads ${name} as ${String(expected)}`, () => {
      assert.equal(readBearerKey(metadata), expected);
    });
  }
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SluiceError } from '@sluice/core';
import { decodeExecutorReport, MAX_REPORT_BYTES } from './executor-report.js';
import { encodeJsonPayload, parseJsonPayload, type JsonPayloadKind } from './json-payload.js';

const kind: JsonPayloadKind = {
  what: 'test payload',
  field: 'payload',
  maxBytes: 16,
  invalid: (field, problem) =>
    new SluiceError('invalid_argument', `test payload ${field} ${problem}`, { field }),
};

function refusal(data: Uint8Array, parse: (data: Uint8Array) => unknown): SluiceError {
  try {
    parse(data);
  } catch (error) {
    assert.ok(error instanceof SluiceError);
    assert.equal(error.code, 'invalid_argument');
    return error;
  }
  assert.fail('accepted');
}

describe('JSON payloads', () => {
  it('parse what encodes, up to the size', () => {
    assert.deepEqual(parseJsonPayload(encodeJsonPayload({ a: [1, 'é'] }), kind), { a: [1, 'é'] });
  });

  it('refuse a payload too long, not UTF-8 or not JSON, naming the payload', () => {
    const long = refusal(encodeJsonPayload('x'.repeat(20)), (d) => parseJsonPayload(d, kind));
    assert.equal(long.message, 'test payload payload is 22 bytes, more than 16');
    assert.equal(long.field, 'payload');
    const latin1 = refusal(new Uint8Array([0x22, 0xe9, 0x22]), (d) => parseJsonPayload(d, kind));
    assert.equal(latin1.message, 'test payload is not UTF-8 JSON');
    const notJson = refusal(new TextEncoder().encode('{'), (d) => parseJsonPayload(d, kind));
    assert.equal(notJson.field, 'payload');
  });

  it('bound the executor reports the governor reads', () => {
    const error = refusal(new Uint8Array(MAX_REPORT_BYTES + 1), decodeExecutorReport);
    assert.equal(error.field, 'report');
    assert.equal(refusal(encodeJsonPayload([]), decodeExecutorReport).field, 'report');
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import {
  STATUS_DETAILS_TRAILER,
  decodeStatusDetails,
  encodeStatusDetails,
} from './status-details.js';
import type { GrpcError } from './status.js';
import {
  alreadyExists,
  failedPrecondition,
  invalidArgument,
  isGrpcError,
  notFound,
  resourceExhausted,
  unauthenticated,
  unavailable,
  unimplemented,
} from './status.js';

describe('status helpers', () => {
  const cases: [GrpcError, status, string][] = [
    [
      invalidArgument('input', 'must be valid JSON'),
      status.INVALID_ARGUMENT,
      'input: must be valid JSON',
    ],
    [notFound('task t-1 not found'), status.NOT_FOUND, 'task t-1 not found'],
    [failedPrecondition('task is succeeded'), status.FAILED_PRECONDITION, 'task is succeeded'],
    [alreadyExists('key reused'), status.ALREADY_EXISTS, 'key reused'],
    [unauthenticated(), status.UNAUTHENTICATED, 'a valid API key is required'],
    [unimplemented('later'), status.UNIMPLEMENTED, 'later'],
    [resourceExhausted('slow down', 250), status.RESOURCE_EXHAUSTED, 'slow down'],
    [unavailable('shutting down'), status.UNAVAILABLE, 'shutting down'],
  ];
  for (const [error, code, details] of cases) {
    it(`builds ${status[code]}`, () => {
      assert.ok(isGrpcError(error));
      assert.ok(error instanceof Error);
      assert.equal(error.code, code);
      assert.equal(error.details, details);
      assert.equal(error.message, details);
    });
  }

  it('attaches RetryInfo to RESOURCE_EXHAUSTED only', () => {
    const [bytes] = resourceExhausted('slow down', 2_345.4).metadata.get(STATUS_DETAILS_TRAILER);
    assert.ok(Buffer.isBuffer(bytes));
    assert.deepEqual(decodeStatusDetails(bytes), {
      code: status.RESOURCE_EXHAUSTED,
      message: 'slow down',
      retryDelayMs: 2_345,
    });
    assert.deepEqual(notFound('x').metadata.get(STATUS_DETAILS_TRAILER), []);
  });

  it('attaches a BadRequest naming the field to INVALID_ARGUMENT', () => {
    const [bytes] = invalidArgument('priority', 'must be P0-P3').metadata.get(
      STATUS_DETAILS_TRAILER,
    );
    assert.ok(Buffer.isBuffer(bytes));
    assert.deepEqual(decodeStatusDetails(bytes).fieldViolations, [
      { field: 'priority', description: 'must be P0-P3' },
    ]);
  });

  it('does not treat look-alike errors as GrpcError', () => {
    assert.equal(isGrpcError(Object.assign(new Error('x'), { code: 5, details: 'x' })), false);
    assert.equal(isGrpcError({ code: 5 }), false);
  });
});

describe('status details encoding', () => {
  it('encodes google.rpc.Status with the standard field numbers and type URLs', () => {
    const bytes = encodeStatusDetails(8, 'busy', { retryDelayMs: 1_500 });
    // Status.code = 1 (varint 8), Status.message = 2 ("busy"), Status.details = 3 (Any).
    assert.deepEqual([...bytes.subarray(0, 8)], [0x08, 8, 0x12, 4, ...Buffer.from('busy')]);
    assert.equal(bytes[8], 0x1a);
    assert.ok(bytes.includes(Buffer.from('type.googleapis.com/google.rpc.RetryInfo')));
    // RetryInfo.retry_delay = 1 → Duration{seconds = 1: 1, nanos = 2: 500_000_000}.
    assert.ok(
      bytes.includes(Buffer.from([0x0a, 0x08, 0x08, 0x01, 0x10, 0x80, 0xca, 0xb5, 0xee, 0x01])),
    );
  });

  it('clamps a negative delay to zero', () => {
    assert.equal(
      decodeStatusDetails(encodeStatusDetails(8, 'x', { retryDelayMs: -5 })).retryDelayMs,
      0,
    );
  });
});

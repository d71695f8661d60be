/**
 * Which failures are Postgres refusing a statement's data: classes 22, 23 and 54, also wrapped
 * as a cause (drizzle wraps the driver's error); not a deadlock, an unavailable server or an
 * error without a SQLSTATE. And which are Sluice's own refusals (`sluice_refuse_commit`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isRefusedOnPurpose, isWriteRefused } from './refused.js';

const withCode = (code: string) => Object.assign(new Error(`failed: ${code}`), { code });

describe('isWriteRefused', () => {
  it('is true for data, constraint and size refusals, also as a cause', () => {
    for (const code of ['22P05', '22001', '23505', '23503', '54000']) {
      assert.equal(isWriteRefused(withCode(code)), true, code);
    }
    assert.equal(isWriteRefused(new Error('wrapped', { cause: withCode('22P05') })), true);
  });

  it('is false for what writing apart would not fix', () => {
    for (const code of ['40P01', '40001', '57P01', '08006', 'ECONNRESET', 'CONNECTION_CLOSED']) {
      assert.equal(isWriteRefused(withCode(code)), false, code);
    }
    assert.equal(isWriteRefused(new Error('no code')), false);
    assert.equal(isWriteRefused('not an error'), false);
  });
});

describe('isRefusedOnPurpose', () => {
  it("is true for sluice_refuse_commit's SQLSTATE, also as a cause, and for nothing else", () => {
    assert.equal(isRefusedOnPurpose(withCode('SLR01')), true);
    assert.equal(isRefusedOnPurpose(new Error('wrapped', { cause: withCode('SLR01') })), true);
    for (const code of ['25P02', '23505', '40P01', 'CONNECTION_CLOSED']) {
      assert.equal(isRefusedOnPurpose(withCode(code)), false, code);
    }
    assert.equal(isRefusedOnPurpose('not an error'), false);
  });
});

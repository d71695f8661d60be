import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCount, parsePriority, parseStatus } from './arg-values.js';
import { UsageError } from './command.js';

describe('parsePriority', () => {
  for (const text of ['P1', 'p1', '1', 'PRIORITY_P1', ' p1 ']) {
    it(`reads "${text}" as PRIORITY_P1`, () => assert.equal(parsePriority(text), 'PRIORITY_P1'));
  }
  for (const text of ['P4', '', 'high', 'PRIORITY_UNSPECIFIED', 'P', '-1']) {
    it(`refuses "${text}", listing the choices`, () =>
      assert.throws(
        () => parsePriority(text),
        (error: unknown) => {
          assert.ok(error instanceof UsageError);
          assert.match(error.message, /--priority must be one of P0, P1, P2, P3/);
          return true;
        },
      ));
  }
});

describe('parseStatus', () => {
  const cases: [string, string][] = [
    ['running', 'TASK_STATUS_RUNNING'],
    ['waiting_approval', 'TASK_STATUS_WAITING_APPROVAL'],
    ['Waiting-Approval', 'TASK_STATUS_WAITING_APPROVAL'],
    ['TASK_STATUS_PAUSED', 'TASK_STATUS_PAUSED'],
    ['failed_terminal', 'TASK_STATUS_FAILED_TERMINAL'],
  ];
  for (const [text, status] of cases) {
    it(`reads "${text}"`, () => assert.equal(parseStatus(text), status));
  }
  it('refuses unknown and unspecified states, listing the valid words', () => {
    for (const text of ['done', 'unspecified', '']) {
      assert.throws(
        () => parseStatus(text),
        /--status must be one of queued, running, waiting_approval, succeeded, failed_retryable, failed_terminal, cancelled, paused/,
      );
    }
  });
});

describe('parseCount', () => {
  it('reads whole numbers from the minimum up', () => {
    assert.equal(parseCount('0', '--after', 0), 0);
    assert.equal(parseCount('250', '--limit', 1), 250);
  });
  for (const text of ['0', '-1', '1.5', '1e3', '0x10', 'ten', '', '99999999999999999999']) {
    it(`refuses "${text}" for a minimum of 1`, () =>
      assert.throws(
        () => parseCount(text, '--limit', 1),
        /--limit must be a whole number of at least 1/,
      ));
  }
});

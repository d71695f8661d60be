import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeVerdict, Ledger } from './ledger.js';

test('a run where every id is handled once is exactly-once', async () => {
  const ledger = new Ledger(['a', 'b']);
  const waiting = ledger.waitComplete(5_000);
  await ledger.handler({ id: 'b' });
  await ledger.handler({ id: 'a' });
  assert.equal(await waiting, true);
  assert.deepEqual(ledger.verdict(), {
    expected: 2,
    handled: 2,
    missing: 0,
    duplicates: 0,
    unknown: 0,
    exactlyOnce: true,
  });
});

test('missing, duplicated and unknown ids fail the run', async () => {
  const ledger = new Ledger(['a', 'b', 'c']);
  ledger.record('a');
  ledger.record('a');
  ledger.record('b');
  ledger.record('zzz');
  assert.equal(await ledger.waitComplete(20), false);
  const verdict = ledger.verdict();
  assert.equal(verdict.exactlyOnce, false);
  assert.equal(describeVerdict(verdict), '1 missing, 1 duplicated, 1 unknown of 3');
});

test('a duplicate after completion still fails the run', () => {
  const ledger = new Ledger(['a']);
  ledger.record('a');
  assert.equal(ledger.complete, true);
  ledger.record('a');
  assert.equal(ledger.verdict().exactlyOnce, false);
});

test('the same id twice in one run is refused', () => {
  assert.throws(() => new Ledger(['a', 'a']), /twice/);
});

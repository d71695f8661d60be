import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChainLedger, describeChainVerdict } from './chain-system.js';

test('chains whose steps each ran once, in order, are exactly-once', async () => {
  const ledger = new ChainLedger(['x', 'y']);
  const done = ledger.final.waitComplete(5_000);
  for (const step of [0, 1, 2]) {
    await ledger.onStep('y', step);
    await ledger.onStep('x', step);
  }
  assert.equal(await done, true);
  const verdict = ledger.verdict();
  assert.equal(verdict.exactlyOnce, true);
  assert.equal(verdict.handled, 2);
  assert.equal(ledger.stepsHandled, 6);
  assert.equal(ledger.hops().length, 4);
  assert.ok(ledger.hops().every((ms) => ms >= 0));
  assert.equal(describeChainVerdict(verdict), 'all 2 chains, every step exactly once');
});

test('a duplicated middle step, a step out of order and a missing chain fail the run', () => {
  const ledger = new ChainLedger(['x', 'y', 'z']);
  for (const step of [0, 1, 1, 2]) ledger.record('x', step);
  // y's final step before its first two: out of order (twice: step 2 before 1, and 1 before 0).
  for (const step of [2, 1, 0]) ledger.record('y', step);
  ledger.record('z', 0);
  ledger.record('nobody', 0);
  ledger.record('x', 3);
  const verdict = ledger.verdict();
  assert.equal(verdict.exactlyOnce, false);
  assert.equal(verdict.handled, 2);
  assert.equal(verdict.missing, 1);
  assert.equal(verdict.duplicates, 1);
  assert.equal(verdict.unknown, 2);
  assert.equal(verdict.outOfOrder, 2);
  assert.equal(
    describeChainVerdict(verdict),
    'step 0: 1 unknown; step 1: 1 missing, 1 duplicated; step 2: 1 missing, 1 unknown; ' +
      '2 steps started before their previous step of 3 chains',
  );
});

test("a step's hand-off is timed from the starts its handlers report", () => {
  const ledger = new ChainLedger(['x']);
  ledger.record('x', 0, 1_000);
  ledger.record('x', 1, 1_012.5);
  ledger.record('x', 2, 1_020);
  assert.deepEqual(ledger.hops(), [12.5, 7.5]);
});

/**
 * The start log the latency scenarios time jobs by: a job's first start counts, at the time its
 * adapter says the handler began when the handler ran in another process, else at the call.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { epochNow } from '../latency.js';
import { Ledger } from '../ledger.js';
import { StartLog } from './arrivals.js';

test('a start is the time the handler reported, else the call; the first start counts', async () => {
  const ledger = new Ledger(['remote', 'local']);
  const starts = new StartLog(ledger);
  await starts.handler({ id: 'remote', startedAt: 1_000.25 });
  const before = epochNow();
  await starts.handler({ id: 'local' });
  const after = epochNow();
  await starts.handler({ id: 'remote', startedAt: 2_000 });
  assert.equal(starts.startedAt.get('remote'), 1_000.25);
  const local = starts.startedAt.get('local');
  assert.ok(local !== undefined && local >= before && local <= after);
  assert.equal(ledger.verdict().duplicates, 1, 'the second start still reaches the ledger');
});

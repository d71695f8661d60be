import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog, openKvBuckets } from '@sluice/bus';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { createLogger } from '@sluice/telemetry';
import type { BatchLoop } from './batch-loop.js';
import { createLeaseLoop, type LeaseLoop } from './lease-loop.js';

const TTL_MS = 1_500;
const log = createLogger({ service: 'lease-loop-test', level: 'silent' });

/** Waits until `condition` holds, failing after `timeoutMs`. */
async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) assert.fail(`timed out: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * A replica's duty, with a loop that records what was asked of it, in order, in `journal`, and
 * each tenure's fencing token in `revisions`.
 */
function replica(name: string, journal: string[], revisions: number[], kv: KV): LeaseLoop {
  let tenures = 0;
  return createLeaseLoop({
    kv,
    key: 'duty',
    holderId: name,
    ttlMs: TTL_MS,
    log,
    duty: 'test',
    startTenure: (revision) => {
      tenures += 1;
      const tenure = `${name}#${tenures}`;
      journal.push(`${tenure} started`);
      revisions.push(revision);
      const loop: BatchLoop = {
        wake: () => journal.push(`${tenure} woken`),
        wakeIn: () => undefined,
        stop: async () => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          journal.push(`${tenure} loop stopped`);
        },
      };
      const end = (): Promise<void> => {
        journal.push(`${tenure} ended`);
        return Promise.resolve();
      };
      return { loop, end };
    },
  });
}

describe('createLeaseLoop', () => {
  const prefix = uniquePrefix('leaseloop');
  let nc: NatsConnection;
  const duties: LeaseLoop[] = [];

  before(async () => {
    nc = await connectNats({ url: natsUrl(), name: 'lease-loop-test' });
  });

  after(async () => {
    for (const duty of duties) await duty.stop();
    await closeNats(nc);
    await deletePrefixResources(natsUrl(), prefix);
  });

  it('runs a loop only while leading, ends it before a successor starts its own', async () => {
    const { leases } = await openKvBuckets(nc, createBusCatalog(prefix), { leaseTtlMs: TTL_MS });
    const journal: string[] = [];
    const revisions: number[] = [];
    const first = replica('a', journal, revisions, leases);
    const second = replica('b', journal, revisions, leases);
    duties.push(first, second);

    await first.start();
    await second.start();
    assert.equal(first.isLeader(), true, 'the first to ask leads');
    assert.equal(second.isLeader(), false);
    first.wake();
    second.wake(); // a standby has no loop to wake
    assert.deepEqual(journal, ['a#1 started', 'a#1 woken']);

    await first.stop();
    assert.equal(first.isLeader(), false);
    await until(() => second.isLeader(), 'the standby takes the duty over');
    second.wake();
    assert.deepEqual(journal, [
      'a#1 started',
      'a#1 woken',
      'a#1 loop stopped',
      'a#1 ended',
      'b#1 started',
      'b#1 woken',
    ]);

    const [firstTenure = 0, secondTenure = 0] = revisions;
    assert.ok(secondTenure > firstTenure, 'the successor leads under a later fencing token');

    await second.stop();
    assert.equal(journal.at(-2), 'b#1 loop stopped');
    assert.equal(journal.at(-1), 'b#1 ended');
  });
});

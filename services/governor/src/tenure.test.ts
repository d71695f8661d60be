/**
 * A tenure publishes each decision that says something new at once, and one that says nothing new
 * (the last one written, but for its time) only once `refreshMs` has passed since the last write.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NOTHING_DECIDED, type GovernorDecision } from '@sluice/bus';
import { createLogger } from '@sluice/telemetry';
import { startTenure } from './tenure.js';

const log = createLogger({ service: 'tenure-test', level: 'silent' });

/** A decision made at `at` (ms on the test's clock) reading a queue depth of `depth`. */
function decision(at: number, depth: number): GovernorDecision {
  return {
    epoch: 1,
    holder: 'test',
    level: 'normal',
    holds: [],
    reject: [],
    decided_at: new Date(at).toISOString(),
    reasons: [],
    ...NOTHING_DECIDED,
    signals: [{ signal: 'queue_depth', scope: 'all', value: depth, level: 'normal' }],
  };
}

/**
 * Runs a tenure through `depths.length` decisions, its clock moving `tickMs` a decision; resolves
 * with the times (on that clock) of the decisions written and announced.
 */
async function publications(
  depths: readonly number[],
  tickMs: number,
  refreshMs: number | undefined,
): Promise<{ written: number[]; announced: number[] }> {
  let clock = 0;
  let decided = 0;
  const written: number[] = [];
  const announced: number[] = [];
  let allDecided: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allDecided = resolve));
  const tenure = startTenure({
    holder: 'test',
    leaseRevision: 1,
    intervalMs: 1,
    ...(refreshMs === undefined ? {} : { refreshMs }),
    now: () => clock,
    advanceEpoch: () => Promise.resolve(1),
    decide: () => {
      const depth = depths[decided];
      decided += 1;
      if (depth === undefined) {
        // Past the script: every decision of it was published or skipped. Answering "deposed"
        // ends the tenure at once.
        allDecided();
        return Promise.resolve(undefined);
      }
      clock += tickMs;
      return Promise.resolve(decision(clock, depth));
    },
    write: (d) => {
      written.push(Date.parse(d.decided_at));
      return Promise.resolve({
        type: 'written',
        revision: written.length,
        previous: { type: 'none' },
      });
    },
    announce: (d) => void announced.push(Date.parse(d.decided_at)),
    log,
  });
  await done;
  await tenure.stop();
  return { written, announced };
}

describe('a governor tenure', () => {
  it('publishes a decision that says nothing new only once the refresh time has passed', async () => {
    const { written, announced } = await publications([0, 0, 0, 0, 0, 0, 0, 0], 100, 300);
    assert.deepEqual(written, [100, 400, 700]);
    assert.deepEqual(announced, written);
  });

  it('publishes at once a decision whose readings changed', async () => {
    const { written } = await publications([0, 0, 7, 7, 7, 0, 0], 100, 1_000);
    assert.deepEqual(written, [100, 300, 600]);
  });

  it('publishes every decision without a refresh time', async () => {
    const { written } = await publications([0, 0, 0], 100, undefined);
    assert.deepEqual(written, [100, 200, 300]);
  });
});

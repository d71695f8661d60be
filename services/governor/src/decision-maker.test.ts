/**
 * The decision maker against the real Postgres: its reads of the step tables are paced by what
 * they cost (paced-read.ts), so a slow count of the ready steps is not taken again at every tick,
 * and is taken again once its pace allows. The read is made slow by a lock held on the table while
 * the governor's clock moves on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_BREAKER } from '@sluice/core';
import { createTask } from '@sluice/db';
import {
  oneStepManifest,
  openTaskTypeDatabase,
  waitForLockWaiter,
  type TaskTypeDatabase,
} from '@sluice/db/testing';
import type { GovernorDecision } from '@sluice/bus';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { loadGovernorConfig } from './config.js';
import { createDecisionMaker } from './decision-maker.js';
import { ExecutorReports } from './signals/executor-reports.js';

const manifest = oneStepManifest({ name: 'paced-test' });
let fixture: TaskTypeDatabase;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 4 });
});

after(async () => {
  await fixture?.close();
});

async function createTasks(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await createTask(fixture.handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 3,
      input: {},
    });
  }
}

function queueDepth(decision: GovernorDecision | undefined): number | undefined {
  return decision?.signals?.find((s) => s.signal === 'queue_depth' && s.scope === 'all')?.value;
}

describe('the decision maker', () => {
  it('reads the queue depth again only as often as its cost allows', async () => {
    const { handle } = fixture;
    let clock = 1_000_000;
    const maker = createDecisionMaker({
      db: handle.db,
      reports: new ExecutorReports(10_000, 3_000),
      thresholds: loadGovernorConfig({}).SLUICE_GOVERNOR_THRESHOLDS,
      breaker: DEFAULT_BREAKER,
      windowMs: 10_000,
      retryAfterBaseMs: 1_000,
      holder: 'decision-maker-test',
      metrics: createMetrics(),
      log: createLogger({ service: 'decision-maker-test', level: 'silent' }),
      now: () => clock,
    });
    await createTasks(2);

    // The first count waits for a lock on the step table while 200 ms pass on the governor's
    // clock: a read of 200 ms, at 2 % of the time, is taken again no sooner than 10 s later.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const holding = handle.sql.begin(async (tx) => {
      await tx`lock table task_steps in access exclusive mode`;
      await released;
    });
    const first = maker.decide(1);
    await waitForLockWaiter(handle.sql);
    clock += 200;
    release();
    await holding;
    assert.equal(queueDepth(await first), 2);

    await createTasks(3);
    clock += 1_000;
    assert.equal(queueDepth(await maker.decide(1)), 2, 'the last count, not read again yet');
    clock += 9_000; // 10.2 s after the slow read began
    assert.equal(queueDepth(await maker.decide(1)), 5, 'read again once its pace allows');
  });
});

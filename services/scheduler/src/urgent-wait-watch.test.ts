/**
 * The urgent-wait guard's loop against a real Postgres: a P0 start that waited past the target caps
 * its resource (the gauge shows it), and once no P0 step starts there for the quiet spell the cap
 * is lifted, the gauge goes and the dispatcher is woken; the gateways are told of the cap while it
 * stands and once of its lift.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { createTask } from '@sluice/db';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '@sluice/db/testing';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { DEFAULT_FLOOR, UrgentWaitGuard } from './urgent-wait-guard.js';
import { startUrgentWaitWatch } from './urgent-wait-watch.js';

const manifest = oneStepManifest({ name: 'urgent-watch' });
const log = createLogger({ service: 'urgent-wait-watch-test', level: 'silent' });
const GAUGE = /^sluice_urgent_guard_cap\{resource="llm"\} (\d+)$/m;

let fixture: TaskTypeDatabase;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest] });
});

after(async () => {
  await fixture?.close();
});

/** A running step of `llm` that started now, dispatched `waitedMs` before (and due before that). */
async function startedStep(priority: 0 | 3, waitedMs: number): Promise<void> {
  const { task } = await createTask(fixture.handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority,
    input: {},
  });
  await fixture.handle.sql`
    update task_steps set status = 'running', dispatch_count = 1, started_at = now(),
      dispatched_at = now() - make_interval(secs => ${waitedMs / 1_000}),
      due_at = now() - make_interval(secs => ${waitedMs / 1_000 + 1})
    where task_id = ${task.id}
  `;
}

/** Waits (on the event loop, never a fixed sleep) until `probe` holds, for at most 10 s. */
async function until(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await probe())) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await sleep(10);
  }
}

describe('the urgent-wait watch', () => {
  it('caps a resource whose P0 steps waited too long, and lifts the cap when they stop', async () => {
    const metrics = createMetrics();
    const guard = new UrgentWaitGuard({ targetMs: 50, releaseAfterMs: 300, watchForMs: 60_000 });
    let wakeUps = 0;
    const published: Readonly<Record<string, number>>[] = [];
    for (let i = 0; i < 6; i++) await startedStep(3, 0);
    await startedStep(0, 400);
    // Seen with its wait already there, so the first reading cuts by the wait, not at the onset.
    guard.urgentWorkSeen(Date.now(), 'llm');
    const watch = startUrgentWaitWatch({
      db: fixture.handle.db,
      guard,
      log,
      metrics,
      onCapsRaised: () => (wakeUps += 1),
      publishCaps: (caps) => published.push(caps),
    });
    try {
      await until('the resource is capped', () => guard.caps()['llm'] !== undefined);
      // 7 in flight, a wait of 8 × the target: the deepest cut, a quarter (1), and at least DEFAULT_FLOOR.
      assert.equal(guard.caps()['llm'], DEFAULT_FLOOR);
      assert.equal(GAUGE.exec(await metrics.registry.metrics())?.[1], String(DEFAULT_FLOOR));
      assert.equal(wakeUps, 0, 'a lower cap admits nothing new');
      assert.deepEqual(published[0], { llm: DEFAULT_FLOOR }, 'the gateways are told of the cap');

      await until('the cap is lifted', () => guard.caps()['llm'] === undefined);
      assert.equal(wakeUps, 1, 'a lifted cap wakes the dispatcher');
      assert.doesNotMatch(await metrics.registry.metrics(), GAUGE);
      // Told after every reading while capped, then once that nothing is capped any more.
      assert.deepEqual(published.at(-1), {});
      assert.ok(published.slice(0, -1).every((caps) => caps['llm'] === DEFAULT_FLOOR));
    } finally {
      await watch.stop();
    }
  });
});

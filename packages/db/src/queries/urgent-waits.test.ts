/**
 * What the urgent-wait guard reads: the waits (dispatched → started) of the P0 steps started since the
 * cursor, each once, and the steps in flight by resource. A database of its own, so that no other
 * test's steps count.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { createTask } from './tasks.js';
import { readUrgentWaits } from './urgent-waits.js';

const manifest = oneStepManifest();

let fixture: TaskTypeDatabase;
let made = 0;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest] });
});

after(async () => {
  await fixture?.close();
});

/**
 * A step of `resource` at `priority` that is running: dispatched `waitedMs` before its start, which
 * is `startedAgoMs` ago, and due a second before that (or, with `status` 'dispatched', not started).
 */
async function makeStep(
  resource: string,
  priority: Priority,
  options: { waitedMs?: number; startedAgoMs?: number; status?: 'running' | 'dispatched' } = {},
): Promise<void> {
  const { task } = await createTask(fixture.handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority,
    input: { n: made++ },
  });
  const startedAgo = (options.startedAgoMs ?? 0) / 1_000;
  const waited = (options.waitedMs ?? 0) / 1_000;
  const running = (options.status ?? 'running') === 'running';
  await fixture.handle.db.execute(sql`
    update task_steps set resource = ${resource}, status = ${running ? 'running' : 'dispatched'},
      dispatch_count = 1,
      started_at = case when ${running} then now() - make_interval(secs => ${startedAgo}) end,
      dispatched_at = now() - make_interval(secs => ${startedAgo + waited}),
      due_at = now() - make_interval(secs => ${startedAgo + waited + 1})
    where task_id = ${task.id}
  `);
}

describe('the urgent-wait reading', () => {
  it('gives each P0 start once, with its wait, and the steps in flight by resource', async () => {
    const first = await readUrgentWaits(fixture.handle.db, undefined, 1_000);
    assert.deepEqual(first.waits, []);
    assert.deepEqual(first.inFlight, {});

    await makeStep('llm', 0, { waitedMs: 120 });
    await makeStep('llm', 0, { waitedMs: 30 });
    await makeStep('browser', 0, { waitedMs: 10 });
    await makeStep('llm', 3, { waitedMs: 5_000 }); // not P0: in flight, but no wait of interest
    await makeStep('llm', 2, { status: 'dispatched' });
    await makeStep('llm', 0, { waitedMs: 70, startedAgoMs: 60_000 }); // before the window

    const second = await readUrgentWaits(fixture.handle.db, first.cursor, 1_000);
    const waits = second.waits
      .map((w) => `${w.resource} ${Math.round(w.waitMs)}`)
      .sort((a, b) => a.localeCompare(b));
    assert.deepEqual(waits, ['browser 10', 'llm 120', 'llm 30']);
    assert.deepEqual(second.inFlight, {
      llm: { urgent: 3, lower: 2 },
      browser: { urgent: 1, lower: 0 },
    });

    const third = await readUrgentWaits(fixture.handle.db, second.cursor, 1_000);
    assert.deepEqual(third.waits, [], 'nothing started since: no start is counted twice');
    assert.equal(third.cursor, second.cursor, 'the cursor stays where nothing moved it');
    await makeStep('llm', 0, { waitedMs: 40 });
    const fourth = await readUrgentWaits(fixture.handle.db, third.cursor, 1_000);
    assert.deepEqual(
      fourth.waits.map((w) => Math.round(w.waitMs)),
      [40],
    );
  });
});

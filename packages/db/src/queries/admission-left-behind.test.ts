/**
 * What a claim tells about the due ready steps it did not take (`AdmissionClaim.leftBehind`): the
 * dispatcher starts a pass for a freed slot only when the last one left such steps behind. A
 * database of its own, emptied of ready and in-flight steps before each case, so that no other
 * test's steps count.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { setResourceLimit, setTenantLimit } from './admission.js';
import { claimAdmission, type AdmissionClaim, type AdmissionSettings } from './claim.js';
import { createTask } from './tasks.js';

const manifest = oneStepManifest({ resource: 'tool:left' });

const settings: AdmissionSettings = { defaultResourceLimit: 64, agingMs: 30_000 };

let fixture: TaskTypeDatabase;
let made = 0;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme', 'globex'], manifests: [manifest] });
});

after(async () => {
  await fixture?.close();
});

beforeEach(async () => {
  await fixture.handle.db.execute(sql`
    update task_steps set status = 'succeeded', finished_at = now()
    where status in ('ready', 'dispatched', 'running')
  `);
});

async function makeSteps(tenantId: string, priority: Priority, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await createTask(fixture.handle.db, {
      tenantId,
      taskType: manifest,
      priority,
      input: { n: made++ },
    });
  }
}

function claim(limit: number, admission: AdmissionSettings = settings): Promise<AdmissionClaim> {
  return fixture.handle.db.transaction((tx) => claimAdmission(tx, limit, admission));
}

describe('steps a claim leaves behind', () => {
  it('none when nothing is ready, or when it took every due ready step', async () => {
    assert.deepEqual(await claim(10), { steps: [], full: [], leftBehind: false });
    await makeSteps('acme', 2, 2);
    await makeSteps('globex', 1, 1);
    const { steps, leftBehind } = await claim(10);
    assert.equal(steps.length, 3);
    assert.equal(leftBehind, false);
  });

  it('some when the batch was smaller than the ready steps, until a claim takes the rest', async () => {
    await makeSteps('acme', 2, 5);
    const first = await claim(2);
    assert.equal(first.steps.length, 2);
    assert.equal(first.leftBehind, true);
    const rest = await claim(10);
    assert.equal(rest.steps.length, 3);
    assert.equal(rest.leftBehind, false);
  });

  it('some when the room ran out; a full resource is named full instead', async () => {
    await setResourceLimit(fixture.handle.db, 'tool:left', 2);
    try {
      await makeSteps('acme', 2, 4);
      const first = await claim(10);
      assert.equal(first.steps.length, 2);
      assert.equal(first.leftBehind, true, 'two ready steps found no slot');
      const next = await claim(10);
      assert.deepEqual(next, { steps: [], full: ['tool:left'], leftBehind: false });
    } finally {
      await setResourceLimit(fixture.handle.db, 'tool:left', 64);
    }
  });

  it('some when a tenant’s cap kept its steps back', async () => {
    await setTenantLimit(fixture.handle.db, {
      tenantId: 'acme',
      resource: 'tool:left',
      floor: 0,
      cap: 1,
    });
    try {
      await makeSteps('acme', 2, 3);
      const { steps, leftBehind } = await claim(10);
      assert.equal(steps.length, 1);
      assert.equal(leftBehind, true);
      const again = await claim(10);
      assert.equal(again.steps.length, 0);
      assert.equal(again.leftBehind, true, 'still behind: only a freed slot of acme lets them in');
    } finally {
      await setTenantLimit(fixture.handle.db, {
        tenantId: 'acme',
        resource: 'tool:left',
        floor: 0,
        cap: null,
      });
    }
  });

  it('none for a held priority: only the governor’s next decision releases it', async () => {
    await makeSteps('acme', 3, 2);
    await makeSteps('acme', 1, 1);
    const { steps, leftBehind } = await claim(10, { ...settings, heldPriorities: [3] });
    assert.deepEqual(
      steps.map((step) => step.priority),
      [1],
    );
    assert.equal(leftBehind, false);
  });
});

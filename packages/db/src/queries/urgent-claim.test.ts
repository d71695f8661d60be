/**
 * The urgent claim against a real Postgres: a create of P0 work claims its first step in its own
 * transaction, under admission's rules (limits, open breakers, holds), never a lower priority's
 * step, never more steps than it created P0 tasks, and never by waiting for a scheduler's claim;
 * planned ahead on a pool's connections, it leaves a generic plan there and changes nothing.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import { openDatabase, type DatabaseHandle } from '../client.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { ADMISSION_LOCK_NAMESPACE, setResourceLimit } from './admission.js';
import type { AdmissionSettings } from './claim.js';
import { submitTasks, submitTasksClaiming } from './task-batch.js';
import { prepareUrgentClaim } from './urgent-claim.js';
import type { TaskTypeManifest } from './task-types.js';
import type { NewTask, SubmitTaskResult } from './tasks.js';

const RESOURCE = 'llm';

const manifest: TaskTypeManifest = {
  name: 'two-steps',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'first',
  steps: [
    { name: 'first', resource: RESOURCE, timeoutMs: 1000, maxAttempts: 1 },
    { name: 'second', resource: 'tool:http', timeoutMs: 1000, maxAttempts: 1 },
  ],
};

const admission: AdmissionSettings = { defaultResourceLimit: 64, agingMs: 30_000 };

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let made = 0;

beforeEach(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 8 });
  handle = fixture.handle;
});

afterEach(async () => {
  await fixture?.close();
});

function task(priority: Priority, extra: Partial<NewTask> = {}): NewTask {
  return { tenantId: 'acme', taskType: manifest, priority, input: { n: made++ }, ...extra };
}

function idOf(result: SubmitTaskResult | undefined): string {
  assert.ok(result && result.kind !== 'deleted', 'a task');
  return result.task.id;
}

/** The status of each step of a task, in order. */
async function stepStatuses(taskId: string): Promise<string[]> {
  const rows = await handle.sql<{ status: string }[]>`
    select status from task_steps where task_id = ${taskId} order by seq`;
  return rows.map((row) => row.status);
}

/** Makes `count` ready steps of `priority` that came due `dueAgoMs` ago; returns their task ids. */
async function readyTasks(priority: Priority, count: number, dueAgoMs = 0): Promise<string[]> {
  const results = await submitTasks(
    handle.db,
    Array.from({ length: count }, () => task(priority)),
  );
  const ids = results.map(idOf);
  await handle.db.execute(sql`
    update task_steps set due_at = now() - make_interval(secs => ${dueAgoMs / 1_000})
    where task_id in (${sql.join(
      ids.map((id) => sql`${id}::uuid`),
      sql`, `,
    )})
  `);
  return ids;
}

describe('the urgent claim of a create', () => {
  it("claims the P0 task's first step in the create, and no step of a lower priority", async () => {
    const backlog = await readyTasks(3, 5, 60_000);
    const { results, claimed } = await submitTasksClaiming(handle.db, [task(2), task(0), task(1)], {
      admission,
    });
    const [p2, p0, p1] = results.map(idOf);
    assert.deepEqual(
      claimed.map((step) => [step.taskId, step.seq, step.resource, step.priority, step.dispatch]),
      [[p0, 1, RESOURCE, 0, 1]],
    );
    assert.deepEqual(await stepStatuses(p0 as string), ['dispatched']);
    for (const id of [p2, p1, ...backlog]) {
      assert.deepEqual(await stepStatuses(id as string), ['ready'], 'left to the scheduler');
    }
  });

  it('claims nothing for a create without P0 work, or without the urgent claim', async () => {
    const lower = await submitTasksClaiming(handle.db, [task(1), task(3)], { admission });
    assert.deepEqual(lower.claimed, []);
    const off = await submitTasksClaiming(handle.db, [task(0)], undefined);
    assert.deepEqual(off.claimed, []);
    assert.deepEqual(await stepStatuses(idOf(off.results[0])), ['ready']);
  });

  it('claims with idempotency keys, and nothing for a repeat of a key', async () => {
    const keyed = task(0, { idempotencyKey: 'k-1' });
    const first = await submitTasksClaiming(handle.db, [keyed], { admission });
    const id = idOf(first.results[0]);
    assert.deepEqual(
      first.claimed.map((step) => step.taskId),
      [id],
    );
    const repeat = await submitTasksClaiming(handle.db, [keyed], { admission });
    assert.equal(repeat.results[0]?.kind, 'existing');
    assert.deepEqual(repeat.claimed, [], 'the repeat created nothing to claim');
  });

  it('claims at most as many steps as it created P0 tasks, the oldest ready P0 first', async () => {
    const [older] = await readyTasks(0, 1, 5_000);
    const { results, claimed } = await submitTasksClaiming(handle.db, [task(0)], { admission });
    assert.deepEqual(
      claimed.map((step) => step.taskId),
      [older],
      'the older P0 step is the more urgent',
    );
    assert.deepEqual(await stepStatuses(idOf(results[0])), ['ready'], 'left to the scheduler');
  });

  it('admits nothing above the resource limit, on an open breaker, or while P0 is held', async () => {
    await setResourceLimit(handle.db, RESOURCE, 1);
    const first = await submitTasksClaiming(handle.db, [task(0)], { admission });
    assert.equal(first.claimed.length, 1, 'one slot');
    const full = await submitTasksClaiming(handle.db, [task(0)], { admission });
    assert.deepEqual(full.claimed, [], 'the one slot is taken');
    await setResourceLimit(handle.db, RESOURCE, 10);
    const closed = await submitTasksClaiming(handle.db, [task(0)], {
      admission: { ...admission, closedResources: [RESOURCE] },
    });
    assert.deepEqual(closed.claimed, [], 'the breaker is open');
    const held = await submitTasksClaiming(handle.db, [task(0)], {
      admission: { ...admission, heldPriorities: [0] },
    });
    assert.deepEqual(held.claimed, [], 'P0 is held');
    const open = await submitTasksClaiming(handle.db, [task(0)], { admission });
    assert.equal(open.claimed.length, 1, 'room again: the oldest waiting P0 step is claimed');
  });

  it(
    "never waits for a scheduler's claim: with the admission lock taken, it claims nothing",
    { timeout: 60_000 },
    async () => {
      let release = (): void => undefined;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked = (): void => undefined;
      const lockTaken = new Promise<void>((resolve) => (locked = resolve));
      // A scheduler's claim in progress: it holds the resource's admission lock until released.
      const holder = handle.sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(${ADMISSION_LOCK_NAMESPACE}::int, hashtext(${RESOURCE}))`;
        locked();
        await released;
      });
      try {
        await lockTaken;
        // Were the create to wait for the lock, it would never end: the holder waits for it.
        const { results, claimed } = await submitTasksClaiming(handle.db, [task(0)], { admission });
        assert.deepEqual(claimed, []);
        assert.deepEqual(await stepStatuses(idOf(results[0])), ['ready'], 'left to the scheduler');
      } finally {
        release();
        await holder;
      }
      const after = await submitTasksClaiming(handle.db, [task(0)], { admission });
      assert.equal(after.claimed.length, 1, 'the lock is free again');
    },
  );
});

describe('planning the urgent claim ahead', () => {
  it('leaves a generic plan of the claim on the connection and claims nothing', async () => {
    const [urgent] = await readyTasks(0, 1);
    // One connection, so the reads below see its prepared statements.
    const single = openDatabase(fixture.database.url, { max: 1 });
    try {
      await prepareUrgentClaim(single.db, 1, admission);
      const plans = await single.sql<{ generic_plans: string }[]>`
        select generic_plans from pg_prepared_statements
        where statement like '%pg_try_advisory_xact_lock%'
           or statement like '%ready_groups%'`;
      assert.ok(plans.length > 0, 'the claim is prepared on the connection');
      assert.ok(
        plans.some((plan) => Number(plan.generic_plans) > 0),
        'with a generic plan made',
      );
    } finally {
      await single.close();
    }
    assert.deepEqual(await stepStatuses(urgent as string), ['ready'], 'nothing claimed');
    const { claimed } = await submitTasksClaiming(handle.db, [task(0)], { admission });
    assert.deepEqual(
      claimed.map((step) => step.taskId),
      [urgent],
      'no lock or claim left behind',
    );
  });
});

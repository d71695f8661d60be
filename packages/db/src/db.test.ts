/**
 * Integration tests of the db package against the real Postgres: migrations, idempotent creation,
 * the transition function under races, and the ready-queue claim.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { historyProblem, eventFromRecord, type TaskEvent, type TaskStatus } from '@sluice/core';
import { openDatabase, type DatabaseHandle } from './client.js';
import { readdirSync } from 'node:fs';
import { MIGRATIONS_FOLDER, migrateDatabase } from './migrate.js';
import { applyTransition, applyTransitions } from './transition.js';
import { createApiKey, createTenant, findKeyOwner } from './queries/tenants.js';
import {
  findLatestTaskTypes,
  registerTaskType,
  type TaskTypeManifest,
} from './queries/task-types.js';
import { createTask, listTaskEvents, type TaskRecord } from './queries/tasks.js';
import { claimReadySteps } from './queries/claim.js';
import { ADMISSION_RATE_WINDOW_MS, estimateWaitMs, queueStanding } from './queries/queue.js';
import { createTestDatabase, migratedTemplate, type TestDatabase } from './testing/index.js';

const manifest: TaskTypeManifest = {
  name: 'two-steps',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'first',
  steps: [
    { name: 'first', resource: 'llm', timeoutMs: 1000, maxAttempts: 1 },
    { name: 'second', resource: 'tool:http', timeoutMs: 1000, maxAttempts: 1 },
  ],
};

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  const template = await migratedTemplate(migrateDatabase);
  database = await createTestDatabase({ template });
  handle = openDatabase(database.url, { max: 20 });
  await createTenant(handle.db, { id: 'acme' });
  await createTenant(handle.db, { id: 'globex' });
  await registerTaskType(handle.db, manifest);
});

after(async () => {
  await handle.close();
  await database.drop();
});

function newTask(
  extra: { idempotencyKey?: string; input?: Record<string, string>; tenantId?: string } = {},
) {
  return createTask(handle.db, {
    tenantId: extra.tenantId ?? 'acme',
    taskType: manifest,
    priority: 2,
    input: extra.input ?? { topic: 'x' },
    ...(extra.idempotencyKey ? { idempotencyKey: extra.idempotencyKey } : {}),
  });
}

async function history(task: TaskRecord) {
  const events = await listTaskEvents(handle.db, task.id, 0);
  return events
    .filter((e) => e.toStatus !== null)
    .map((e) => {
      const event = eventFromRecord(e.type, e.data);
      assert.ok(event, `event type ${e.type}`);
      return { event, toStatus: e.toStatus as TaskStatus };
    });
}

describe('migrateDatabase', () => {
  it('can run from several services at once', async () => {
    await using fresh = await createTestDatabase();
    await Promise.all([1, 2, 3, 4].map(() => migrateDatabase(fresh.url)));
    const check = openDatabase(fresh.url, { max: 1 });
    try {
      const rows = await check.sql`select count(*)::int as n from drizzle.__drizzle_migrations`;
      const files = readdirSync(MIGRATIONS_FOLDER).filter((f) => f.endsWith('.sql'));
      assert.equal(rows[0]?.['n'], files.length, 'each migration applied once');
    } finally {
      await check.close();
    }
  });
});

describe('API keys', () => {
  it('finds the tenant of a key and nothing for a wrong one', async () => {
    const key = await createApiKey(handle.db, { tenantId: 'acme' });
    assert.match(key, /^slk_/);
    assert.deepEqual(await findKeyOwner(handle.db, key), { tenantId: 'acme', isAdmin: false });
    assert.equal(await findKeyOwner(handle.db, `${key}x`), undefined);
    const rows = await handle.sql`select key_hash from api_keys`;
    assert.ok(
      rows.every((row) => row['key_hash'] !== key),
      'the key itself is never stored',
    );
  });
});

describe('task types', () => {
  it('findLatestTaskTypes reads the latest version of each type named, leaving out unknown ones', async () => {
    const v1 = { ...manifest, name: 'versioned' };
    await registerTaskType(handle.db, v1);
    await registerTaskType(handle.db, { ...v1, version: 2, description: 'second' });
    const types = await findLatestTaskTypes(handle.db, ['versioned', 'two-steps', 'unknown']);
    assert.deepEqual(
      [...types].map(([name, type]) => [name, type.version, type.description]).sort(),
      [
        ['two-steps', 1, ''],
        ['versioned', 2, 'second'],
      ],
    );
    assert.deepEqual(await findLatestTaskTypes(handle.db, []), new Map());
  });
});

describe('createTask', () => {
  it('records the task, its create event and its first ready step', async () => {
    const { task, created } = await newTask();
    assert.equal(created, true);
    assert.equal(task.status, 'queued');
    assert.equal(task.lastEventSeq, 1);
    const steps =
      await handle.sql`select seq, name, resource, status, priority, tenant_id from task_steps where task_id = ${task.id}`;
    assert.deepEqual(
      steps.map((s) => ({ ...s })),
      [{ seq: 1, name: 'first', resource: 'llm', status: 'ready', priority: 2, tenant_id: 'acme' }],
    );
    assert.equal(historyProblem(await history(task)), undefined);
  });

  it('makes one task of concurrent repeats of an idempotency key', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => newTask({ idempotencyKey: 'same-key' })),
    );
    const ids = new Set(results.map((r) => r.task.id));
    assert.equal(ids.size, 1);
    assert.equal(results.filter((r) => r.created).length, 1);
    const [row] =
      await handle.sql`select count(*)::int as n from tasks where idempotency_key = 'same-key'`;
    assert.equal(row?.['n'], 1);
  });

  it('refuses a repeated key with another input, changing nothing', async () => {
    await newTask({ idempotencyKey: 'k2', input: { topic: 'a' } });
    const [before] = await handle.sql`select count(*)::int as n from tasks`;
    await assert.rejects(newTask({ idempotencyKey: 'k2', input: { topic: 'b' } }), {
      code: 'already_exists',
    });
    const [afterRow] = await handle.sql`select count(*)::int as n from tasks`;
    assert.equal(afterRow?.['n'], before?.['n']);
  });

  it('treats a key of another tenant as a different key', async () => {
    const a = await newTask({ idempotencyKey: 'shared' });
    const b = await newTask({ idempotencyKey: 'shared', tenantId: 'globex' });
    assert.notEqual(a.task.id, b.task.id);
  });
});

describe('applyTransition', () => {
  it('applies what the table allows and records the event', async () => {
    const { task } = await newTask();
    const [result] = await applyTransitions(handle.db, [
      { taskId: task.id, event: { type: 'cancel' } },
    ]);
    assert.ok(result?.ok);
    assert.equal(result.to.status, 'cancelled');
    assert.equal(result.seq, 2);
    assert.equal(historyProblem(await history(task)), undefined);
  });

  it('refuses what the table does not allow and changes nothing', async () => {
    const { task } = await newTask();
    const [result] = await applyTransitions(handle.db, [
      { taskId: task.id, event: { type: 'complete' } },
    ]);
    assert.deepEqual(result && !result.ok && result.code, 'refused');
    const [row] =
      await handle.sql`select status, version, last_event_seq from tasks where id = ${task.id}`;
    assert.deepEqual({ ...row }, { status: 'queued', version: 1, last_event_seq: 1 });
  });

  it('hides another tenant’s task', async () => {
    const { task } = await newTask();
    const result = await applyTransition(handle.db, {
      taskId: task.id,
      tenantId: 'globex',
      event: { type: 'cancel' },
    });
    assert.deepEqual(result.ok ? 'applied' : result.code, 'not_found');
  });

  it('lets exactly one of concurrent conflicting requests win', async () => {
    const { task } = await newTask();
    await applyTransition(handle.db, { taskId: task.id, event: { type: 'start' } });
    await applyTransition(handle.db, { taskId: task.id, event: { type: 'await_approval' } });
    const requests: TaskEvent[] = [
      ...Array.from({ length: 10 }, (): TaskEvent => ({ type: 'approve' })),
      ...Array.from({ length: 10 }, (): TaskEvent => ({ type: 'reject' })),
    ];
    const results = await Promise.all(
      requests.map((event) =>
        handle.db.transaction((tx) => applyTransition(tx, { taskId: task.id, event })),
      ),
    );
    assert.equal(results.filter((r) => r.ok).length, 1);
    assert.equal(historyProblem(await history(task)), undefined);
  });

  it('applies a batch in one commit', async () => {
    const tasks = await Promise.all([newTask(), newTask(), newTask()]);
    const results = await applyTransitions(
      handle.db,
      tasks.map(({ task }) => ({ taskId: task.id, event: { type: 'pause' } })),
    );
    assert.deepEqual(
      results.map((r) => r.ok && r.to.status),
      ['paused', 'paused', 'paused'],
    );
  });
});

describe('claimReadySteps', () => {
  it('never gives one step to two concurrent claimers, and claims most urgent first', async () => {
    await handle.sql`update task_steps set status = 'cancelled' where status = 'ready'`;
    const made: string[] = [];
    for (let i = 0; i < 30; i++) {
      const { task } = await createTask(handle.db, {
        tenantId: 'acme',
        taskType: manifest,
        priority: (i % 4) as 0 | 1 | 2 | 3,
        input: { i: String(i) },
      });
      made.push(task.id);
    }
    const claims = await Promise.all(
      [1, 2, 3].map(() => handle.db.transaction((tx) => claimReadySteps(tx, 8))),
    );
    const claimed = claims.flat();
    assert.equal(new Set(claimed.map((c) => c.id)).size, claimed.length, 'no step claimed twice');
    assert.equal(claimed.length, 24);
    const rest = await handle.db.transaction((tx) => claimReadySteps(tx, 100));
    assert.equal(rest.length, 6);
    assert.ok(
      rest.every((step) => step.priority === 3),
      'the least urgent are left for last',
    );
    assert.ok(claimed.every((c) => c.dispatch === 1));
  });
});

describe('queueStanding', () => {
  it('counts the ready steps ahead and the recent admissions of the priority', async () => {
    await handle.sql`update task_steps set status = 'cancelled' where status = 'ready'`;
    const make = (priority: 0 | 1 | 2 | 3) =>
      createTask(handle.db, {
        tenantId: 'acme',
        taskType: manifest,
        priority,
        input: { p: priority },
      });
    const urgent = await make(0);
    const older = await make(2);
    const mine = await make(2);
    await make(3);
    const before = await queueStanding(handle.db, mine.task.id);
    assert.equal(before?.ahead, 2, 'the P0 step and the older P2 step are ahead');
    const admittedBefore = before?.admittedRecently ?? 0; // earlier tests admitted P2 steps too
    assert.equal(estimateWaitMs({ ahead: 2, admittedRecently: 0 }), undefined, 'no rate, no guess');
    // Admit the two ahead: they leave the queue and count as recent admissions (one of P2).
    await handle.db.transaction((tx) => claimReadySteps(tx, 2));
    const standing = await queueStanding(handle.db, mine.task.id);
    assert.deepEqual(standing, { resource: 'llm', ahead: 0, admittedRecently: admittedBefore + 1 });
    // One P2 admission in the five-minute window: the next in line waits about five minutes.
    assert.equal(estimateWaitMs({ ahead: 0, admittedRecently: 1 }), ADMISSION_RATE_WINDOW_MS);
    assert.equal(estimateWaitMs({ ahead: 9, admittedRecently: 10 }), ADMISSION_RATE_WINDOW_MS);
    assert.equal(
      await queueStanding(handle.db, urgent.task.id),
      undefined,
      'dispatched: not queued',
    );
    assert.ok(older.created);
  });

  it('counts only the steps and admissions of its own resource, which admission keeps apart', async () => {
    await handle.sql`update task_steps set status = 'cancelled' where status = 'ready'`;
    const make = (priority: 0 | 2, resource: string) =>
      createTask(handle.db, {
        tenantId: 'acme',
        taskType: manifest,
        priority,
        input: { p: priority, resource },
      }).then(async ({ task }) => {
        await handle.sql`update task_steps set resource = ${resource} where task_id = ${task.id}`;
        return task;
      });
    // Older steps of its priority on another resource: admitted under that resource's own limit,
    // never in this one's place.
    const others = [await make(2, 'tool:http'), await make(2, 'tool:http')];
    await make(0, 'llm');
    const mine = await make(2, 'llm');
    const before = await queueStanding(handle.db, mine.id);
    assert.equal(before?.ahead, 1, 'only the P0 llm step is ahead');
    // Admissions of the other resource say nothing of how fast llm steps are admitted.
    await handle.sql`
      update task_steps set status = 'dispatched', dispatch_count = 1, dispatched_at = now()
      where task_id in ${handle.sql(others.map((task) => task.id))}`;
    const after = await queueStanding(handle.db, mine.id);
    assert.equal(after?.admittedRecently, before?.admittedRecently);
  });
});

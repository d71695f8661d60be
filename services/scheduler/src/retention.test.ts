/**
 * One retention batch of the scheduler against the real Postgres: it deletes what is old enough,
 * says whether more may be waiting (its batch was full), and counts the deleted rows by table.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  createTask,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
} from '@sluice/db';
import {
  createTestDatabase,
  migratedTemplate,
  oneStepManifest,
  type TestDatabase,
} from '@sluice/db/testing';
import { createLogger, createMetrics, type Metrics } from '@sluice/telemetry';
import { retentionBatch, type RetentionDeps } from './retention.js';

const manifest = oneStepManifest();
const DAY_MS = 86_400_000;
const log = createLogger({ service: 'retention-test', level: 'silent' });

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, manifest);
});

after(async () => {
  await handle?.close();
  await database?.drop();
});

/** `count` tasks that succeeded `ageDays` ago, each with a key, their events relayed. */
async function succeededTasks(count: number, ageDays: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 1,
      input: { i, ageDays },
      idempotencyKey: `key-${ageDays}-${i}`,
    });
    ids.push(task.id);
  }
  await handle.sql`
    update tasks set status = 'succeeded', finished_at = now() - ${ageDays} * interval '1 day'
    where id = any(${ids}::uuid[])`;
  await handle.sql`delete from task_event_outbox
    where event_id in (select id from task_events where task_id = any(${ids}::uuid[]))`;
  return ids;
}

async function counted(metrics: Metrics, table: string): Promise<number> {
  const metric = await metrics.retentionDeleted.get();
  return metric.values.find((v) => v.labels['table'] === table)?.value ?? 0;
}

describe('retentionBatch', () => {
  it('deletes a full batch at a time, reports more while batches are full, and counts rows', async () => {
    const old = await succeededTasks(5, 10);
    const recent = await succeededTasks(2, 1);
    const metrics = createMetrics();
    const deps: RetentionDeps = {
      db: handle.db,
      log,
      metrics,
      ageMs: 7 * DAY_MS,
      tombstoneTtlMs: 30 * DAY_MS,
      batchSize: 2,
    };

    assert.equal(await retentionBatch(deps), true, 'a full batch: more may wait');
    assert.equal(await retentionBatch(deps), true);
    assert.equal(await retentionBatch(deps), false, 'one left, then nothing');
    assert.equal(await retentionBatch(deps), false);

    const left = await handle.sql<{ id: string }[]>`select id from tasks order by id`;
    assert.deepEqual(
      left.map((r) => r.id),
      [...recent].sort(),
    );
    assert.equal(old.length, 5);
    assert.equal(await counted(metrics, 'tasks'), 5);
    assert.equal(await counted(metrics, 'task_steps'), 5);
    assert.equal(await counted(metrics, 'task_events'), 5);
    assert.equal(await counted(metrics, 'idempotency_tombstones'), 0, 'none expired yet');

    await handle.sql`update idempotency_tombstones set expires_at = now() - interval '1 minute'`;
    assert.equal(await retentionBatch(deps), true, 'a full batch of expired tombstones');
    assert.equal(await retentionBatch(deps), true);
    assert.equal(await retentionBatch(deps), false);
    assert.equal(await counted(metrics, 'idempotency_tombstones'), 5);
  });
});

/**
 * A create written on remembered reads, against the real Postgres: it is written while the key and
 * the type still hold, and nothing of it is written when the key was revoked or belongs to another
 * tenant, or the type was registered again or has a newer version — on each of the create's paths
 * (one statement, a keyed create's one write, the keyed transaction).
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { DatabaseHandle } from '../client.js';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { StaleReads, type RememberedReads } from './remembered-reads.js';
import { submitTasksClaiming } from './task-batch.js';
import { findLatestTaskTypes, registerTaskType, type RegisteredTaskType } from './task-types.js';
import { createApiKey, hashApiKey, revokeApiKey } from './tenants.js';
import type { NewTask } from './tasks.js';

const manifest = oneStepManifest({ name: 'remembered' });

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let key: string;
let taskType: RegisteredTaskType;

beforeEach(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme', 'other'], manifests: [manifest] });
  handle = fixture.handle;
  key = await createApiKey(handle.db, { tenantId: 'acme' });
  const latest = (await findLatestTaskTypes(handle.db, [manifest.name])).get(manifest.name);
  assert.ok(latest);
  taskType = latest;
});

afterEach(async () => {
  await fixture?.close();
});

/** What a gateway that read `key` and the type would remember. */
function remembered(keys: readonly string[] = [key], type = taskType): RememberedReads {
  return {
    keyHashes: keys.map(hashApiKey),
    types: [{ name: type.name, version: type.version, registeredStamp: type.registeredStamp }],
  };
}

function create(extra: Partial<NewTask> = {}): NewTask {
  return { tenantId: 'acme', taskType: manifest, priority: 2, input: { n: 1 }, ...extra };
}

async function counts(): Promise<number[]> {
  const [row] = await handle.sql<{ tasks: number; steps: number; events: number }[]>`
    select (select count(*)::int from tasks) as tasks,
           (select count(*)::int from task_steps) as steps,
           (select count(*)::int from task_events) as events`;
  return [row?.tasks ?? -1, row?.steps ?? -1, row?.events ?? -1];
}

/** Each of the create's paths, as a batch that takes it. */
const PATHS: [string, () => NewTask[]][] = [
  ['one statement (no key)', () => [create()]],
  [
    'one write (new keys)',
    () => [create({ idempotencyKey: 'a' }), create({ idempotencyKey: 'b' })],
  ],
];

describe('a create on remembered reads', () => {
  for (const [path, batch] of PATHS) {
    it(`is written while the key and the type hold: ${path}`, async () => {
      const { results } = await submitTasksClaiming(handle.db, batch(), undefined, remembered());
      assert.deepEqual(
        results.map((r) => r.kind),
        batch().map(() => 'created'),
      );
      assert.deepEqual(await counts(), [results.length, results.length, results.length]);
    });

    it(`writes nothing once the key is revoked: ${path}`, async () => {
      const [record] = await handle.sql<{ id: string }[]>`
        select id from api_keys where key_hash = ${hashApiKey(key)}`;
      assert.ok(record);
      assert.notEqual(await revokeApiKey(handle.db, record.id), 'not_found');
      await assert.rejects(
        submitTasksClaiming(handle.db, batch(), undefined, remembered()),
        StaleReads,
      );
      assert.deepEqual(await counts(), [0, 0, 0]);
    });

    it(`writes nothing when the type was registered again since: ${path}`, async () => {
      await registerTaskType(handle.db, { ...manifest, description: 'changed' });
      await assert.rejects(
        submitTasksClaiming(handle.db, batch(), undefined, remembered()),
        StaleReads,
      );
      assert.deepEqual(await counts(), [0, 0, 0]);
    });
  }

  it('writes nothing when a newer version of the type exists', async () => {
    await registerTaskType(handle.db, { ...manifest, version: 2 });
    await assert.rejects(
      submitTasksClaiming(handle.db, [create()], undefined, remembered()),
      StaleReads,
    );
    assert.deepEqual(await counts(), [0, 0, 0]);
  });

  it('writes nothing when one of the keys belongs to another tenant or none', async () => {
    const othersKey = await createApiKey(handle.db, { tenantId: 'other' });
    for (const keys of [
      [key, othersKey],
      [key, 'sk_never_issued'],
    ]) {
      await assert.rejects(
        submitTasksClaiming(handle.db, [create()], undefined, remembered(keys)),
        StaleReads,
      );
    }
    assert.deepEqual(await counts(), [0, 0, 0]);
  });

  it('answers a held key through the keyed transaction, and refuses there too once revoked', async () => {
    const first = await submitTasksClaiming(
      handle.db,
      [create({ idempotencyKey: 'held' })],
      undefined,
      remembered(),
    );
    // The one-write try is refused (the key is held), and the transaction answers the holder.
    const again = await submitTasksClaiming(
      handle.db,
      [create({ idempotencyKey: 'held' }), create({ idempotencyKey: 'new' })],
      undefined,
      remembered(),
    );
    assert.deepEqual(
      again.results.map((r) => r.kind),
      ['existing', 'created'],
    );
    const [held] = first.results;
    const [repeat] = again.results;
    assert.ok(held?.kind === 'created' && repeat?.kind === 'existing');
    assert.equal(repeat.task.id, held.task.id);

    await handle.sql`update api_keys set revoked_at = now()`;
    await assert.rejects(
      submitTasksClaiming(
        handle.db,
        [create({ idempotencyKey: 'held' }), create({ idempotencyKey: 'newer' })],
        undefined,
        remembered(),
      ),
      StaleReads,
    );
    assert.deepEqual(await counts(), [2, 2, 2]);
  });
});

/**
 * The tenant and API key queries against the real Postgres: creation, keyset listing, key
 * issuance for a missing tenant (also inside a transaction), revocation under a race, and keys
 * looked up together.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { openDatabase, type DatabaseHandle } from '../client.js';
import { migrateDatabase } from '../migrate.js';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '../testing/index.js';
import {
  createApiKey,
  createTenant,
  findKeyOwner,
  findKeyOwners,
  findTenant,
  issueApiKey,
  listApiKeys,
  listTenants,
  revokeApiKey,
} from './tenants.js';

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 8 });
});

after(async () => {
  await handle?.close();
  await database?.drop();
});

describe('tenants', () => {
  it('createTenant returns the tenant; findTenant finds it, and nothing for another id', async () => {
    const created = await createTenant(handle.db, { id: 'acme', name: 'Acme' });
    assert.equal(created.id, 'acme');
    assert.equal(created.name, 'Acme');
    assert.ok(created.createdAt instanceof Date);
    assert.deepEqual(await findTenant(handle.db, 'acme'), created);
    assert.equal(await findTenant(handle.db, 'nobody'), undefined);
    await assert.rejects(createTenant(handle.db, { id: 'acme' }), { code: 'already_exists' });
    await assert.rejects(createTenant(handle.db, { id: 'Bad' }), { code: 'invalid_argument' });
  });

  it('listTenants pages in id order after a cursor', async () => {
    for (const id of ['list-c', 'list-a', 'list-b']) await createTenant(handle.db, { id });
    const all = (await listTenants(handle.db, { limit: 100 })).map((t) => t.id);
    assert.deepEqual(all, [...all].sort(), 'in id order');
    const first = await listTenants(handle.db, { limit: 2 });
    const rest = await listTenants(handle.db, { limit: 100, after: first.at(-1)?.id ?? '' });
    assert.deepEqual(
      [...first, ...rest].map((t) => t.id),
      all,
      'each tenant once',
    );
  });
});

describe('API keys', () => {
  it('issueApiKey returns the record without the hash, and the secret', async () => {
    await createTenant(handle.db, { id: 'keys' });
    const issued = await issueApiKey(handle.db, { tenantId: 'keys', isAdmin: true });
    assert.notEqual(issued, 'tenant_not_found');
    if (issued === 'tenant_not_found') return;
    assert.deepEqual(Object.keys(issued.key).sort(), [
      'createdAt',
      'id',
      'isAdmin',
      'keyPrefix',
      'revokedAt',
      'tenantId',
    ]);
    assert.equal(issued.key.keyPrefix, issued.secret.slice(0, 10));
    assert.deepEqual(await findKeyOwner(handle.db, issued.secret), {
      tenantId: 'keys',
      isAdmin: true,
    });
    assert.deepEqual(await listApiKeys(handle.db, 'keys'), [issued.key]);
  });

  it('issueApiKey for a missing tenant writes nothing, and leaves a caller’s transaction usable', async () => {
    assert.equal(await issueApiKey(handle.db, { tenantId: 'ghost' }), 'tenant_not_found');
    await assert.rejects(createApiKey(handle.db, { tenantId: 'ghost' }), { code: 'not_found' });
    await handle.db.transaction(async (tx) => {
      assert.equal(await issueApiKey(tx, { tenantId: 'ghost' }), 'tenant_not_found');
      await createTenant(tx, { id: 'after-ghost' }); // the transaction still works
    });
    assert.ok(await findTenant(handle.db, 'after-ghost'));
    const [row] =
      await handle.sql`select count(*)::int as n from api_keys where tenant_id = 'ghost'`;
    assert.equal(row?.['n'], 0);
  });

  it('revokeApiKey revokes once, at once; racing revocations have one winner', async () => {
    await createTenant(handle.db, { id: 'revoke' });
    const secret = await createApiKey(handle.db, { tenantId: 'revoke' });
    const [key] = await listApiKeys(handle.db, 'revoke');
    assert.ok(key !== undefined);
    const outcomes = await Promise.all(
      Array.from({ length: 5 }, () => revokeApiKey(handle.db, key.id)),
    );
    const winners = outcomes.filter((o) => typeof o === 'object');
    assert.equal(winners.length, 1, 'one revocation wins');
    assert.equal(outcomes.filter((o) => o === 'already_revoked').length, 4);
    assert.ok(winners[0]?.revokedAt instanceof Date);
    assert.equal(await findKeyOwner(handle.db, secret), undefined, 'the key no longer works');
    assert.equal(await revokeApiKey(handle.db, randomUUID()), 'not_found');
    assert.equal(await revokeApiKey(handle.db, 'not-a-uuid'), 'not_found');
  });

  it('findKeyOwners finds the owner of each live key of a list, leaving out unknown and revoked ones', async () => {
    await createTenant(handle.db, { id: 'owners-a' });
    await createTenant(handle.db, { id: 'owners-b' });
    const a = await createApiKey(handle.db, { tenantId: 'owners-a' });
    const b = await issueApiKey(handle.db, { tenantId: 'owners-b', isAdmin: true });
    const revoked = await issueApiKey(handle.db, { tenantId: 'owners-b' });
    if (b === 'tenant_not_found' || revoked === 'tenant_not_found') throw new Error('no tenant');
    assert.equal(typeof (await revokeApiKey(handle.db, revoked.key.id)), 'object');

    const owners = await findKeyOwners(handle.db, [a, b.secret, revoked.secret, 'no-such-key', a]);
    assert.deepEqual(
      owners,
      new Map([
        [a, { tenantId: 'owners-a', isAdmin: false }],
        [b.secret, { tenantId: 'owners-b', isAdmin: true }],
      ]),
    );
    assert.deepEqual(await findKeyOwners(handle.db, []), new Map());
  });
});

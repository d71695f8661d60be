/**
 * `npm run tenant:create -- <tenant-id> [--name "Acme Corp"] [--admin]`
 *
 * Creates a tenant (if it does not exist) and a new API key for it, and prints the key. The key is
 * shown only now: Postgres keeps just its hash.
 */
import { parseArgs } from 'node:util';
import { createApiKey, createTenant, migrateDatabase, openDatabase } from '@sluice/db';
import { isSluiceError } from '@sluice/core';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { name: { type: 'string' }, admin: { type: 'boolean', default: false } },
});
const tenantId = positionals[0];
if (tenantId === undefined || positionals.length > 1) {
  console.error('usage: npm run tenant:create -- <tenant-id> [--name "Display name"] [--admin]');
  process.exit(2);
}

const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/sluice';
await migrateDatabase(databaseUrl);
const database = openDatabase(databaseUrl, { max: 1 });
const { db } = database;
try {
  try {
    await createTenant(db, { id: tenantId, ...(values.name ? { name: values.name } : {}) });
    console.error(`created tenant ${tenantId}`);
  } catch (error) {
    if (!(isSluiceError(error) && error.code === 'already_exists')) throw error;
    console.error(`tenant ${tenantId} exists; adding a key`);
  }
  const key = await createApiKey(db, { tenantId, isAdmin: values.admin });
  console.error(`API key for ${tenantId}${values.admin ? ' (admin)' : ''} — shown once, keep it:`);
  console.log(key);
} catch (error) {
  console.error(isSluiceError(error) ? `error: ${error.message}` : error);
  process.exitCode = 1;
} finally {
  await database.close();
}

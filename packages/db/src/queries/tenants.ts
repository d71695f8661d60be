/**
 * Tenants and their API keys. Keys are random secrets shown once; only their SHA-256 is stored, so a
 * leaked database does not leak keys.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, asc, eq, gt, isNull, sql, type SQL } from 'drizzle-orm';
import { SluiceError, tenantIdProblem } from '@sluice/core';
import type { Executor } from '../client.js';
import { apiKeys, tenants } from '../schema.js';
import { textArrayOf } from './batch-input.js';
import { isUuid } from './tasks.js';

/** Every key starts with this, so a leaked key is recognisable by secret scanners. */
const KEY_PREFIX = 'slk_';

/** SHA-256 (hex) of an API key, as stored. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** A stored tenant. */
export interface TenantRecord {
  readonly id: string;
  /** Name for people; the id when none was given. */
  readonly name: string;
  readonly createdAt: Date;
}

/** A stored API key, without its hash (which never leaves this module). */
export interface ApiKeyRecord {
  readonly id: string;
  readonly tenantId: string;
  /** The first characters of the secret, to tell keys apart without it. */
  readonly keyPrefix: string;
  readonly isAdmin: boolean;
  readonly createdAt: Date;
  /** `null` while the key is valid. */
  readonly revokedAt: Date | null;
}

/** A key just created: its record and its secret, which exists nowhere else. */
export interface IssuedApiKey {
  readonly key: ApiKeyRecord;
  readonly secret: string;
}

/** The columns of {@link TenantRecord}. */
const tenantColumns = { id: tenants.id, name: tenants.name, createdAt: tenants.createdAt };

/** The columns of {@link ApiKeyRecord}: everything but `key_hash`. */
const apiKeyColumns = {
  id: apiKeys.id,
  tenantId: apiKeys.tenantId,
  keyPrefix: apiKeys.keyPrefix,
  isAdmin: apiKeys.isAdmin,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
};

/** Postgres' SQLSTATE for a foreign key violation. */
const FOREIGN_KEY_VIOLATION = '23503';

/**
 * Creates a tenant and returns it; an invalid id is an `invalid_argument` and an existing id an
 * `already_exists` {@link SluiceError}.
 */
export async function createTenant(
  executor: Executor,
  tenant: { id: string; name?: string },
): Promise<TenantRecord> {
  const problem = tenantIdProblem(tenant.id);
  if (problem) throw new SluiceError('invalid_argument', problem, { field: 'tenant_id' });
  const [inserted] = await executor
    .insert(tenants)
    .values({ id: tenant.id, name: tenant.name ?? tenant.id })
    .onConflictDoNothing()
    .returning(tenantColumns);
  if (inserted === undefined) {
    throw new SluiceError('already_exists', `tenant ${tenant.id} exists already`);
  }
  return inserted;
}

/** The tenant with id `tenantId`, or `undefined`. */
export async function findTenant(
  executor: Executor,
  tenantId: string,
): Promise<TenantRecord | undefined> {
  const rows = await executor.select(tenantColumns).from(tenants).where(eq(tenants.id, tenantId));
  return rows[0];
}

/**
 * Up to `limit` tenants in id order, after the id `after` when given (keyset pagination: a page
 * boundary stays put while tenants are added).
 */
export async function listTenants(
  executor: Executor,
  query: { readonly limit: number; readonly after?: string },
): Promise<TenantRecord[]> {
  return executor
    .select(tenantColumns)
    .from(tenants)
    .where(query.after === undefined ? undefined : gt(tenants.id, query.after))
    .orderBy(asc(tenants.id))
    .limit(query.limit);
}

/**
 * Creates a new API key for a tenant: its record and the secret (the only time it is visible), or
 * `'tenant_not_found'` when no such tenant exists (nothing is written).
 */
export async function issueApiKey(
  executor: Executor,
  options: { tenantId: string; isAdmin?: boolean },
): Promise<IssuedApiKey | 'tenant_not_found'> {
  const secret = `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
  try {
    // The foreign key decides whether the tenant exists, with no window between a check and the
    // insert. The statement runs in its own (sub)transaction so that, inside a caller's
    // transaction, the violation rolls back to a savepoint instead of aborting the caller's work.
    const [key] = await executor.transaction((tx) =>
      tx
        .insert(apiKeys)
        .values({
          tenantId: options.tenantId,
          keyHash: hashApiKey(secret),
          keyPrefix: secret.slice(0, KEY_PREFIX.length + 6),
          isAdmin: options.isAdmin ?? false,
        })
        .returning(apiKeyColumns),
    );
    if (key === undefined) throw new Error('inserting an API key returned no row');
    return { key, secret };
  } catch (error) {
    if (sqlStateOf(error) === FOREIGN_KEY_VIOLATION) return 'tenant_not_found';
    throw error;
  }
}

/**
 * Creates a new API key for a tenant and returns the secret (the only time it is visible).
 *
 * @throws SluiceError `not_found` when the tenant does not exist.
 */
export async function createApiKey(
  executor: Executor,
  options: { tenantId: string; isAdmin?: boolean },
): Promise<string> {
  const issued = await issueApiKey(executor, options);
  if (issued === 'tenant_not_found') {
    throw new SluiceError('not_found', `tenant ${options.tenantId} does not exist`);
  }
  return issued.secret;
}

/** The keys of a tenant, revoked ones included, oldest first. */
export async function listApiKeys(executor: Executor, tenantId: string): Promise<ApiKeyRecord[]> {
  return executor
    .select(apiKeyColumns)
    .from(apiKeys)
    .where(eq(apiKeys.tenantId, tenantId))
    .orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
}

/**
 * Revokes a key: from the commit on, {@link findKeyOwner} no longer finds it. Of concurrent
 * revocations of one key exactly one gets the record; the others get `'already_revoked'`.
 * `'not_found'` also answers an id that is not a UUID.
 */
export async function revokeApiKey(
  executor: Executor,
  keyId: string,
): Promise<ApiKeyRecord | 'not_found' | 'already_revoked'> {
  if (!isUuid(keyId)) return 'not_found';
  const [revoked] = await executor
    .update(apiKeys)
    .set({ revokedAt: sql`now()` })
    .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)))
    .returning(apiKeyColumns);
  if (revoked !== undefined) return revoked;
  const [existing] = await executor
    .select({ id: apiKeys.id })
    .from(apiKeys)
    .where(eq(apiKeys.id, keyId));
  return existing === undefined ? 'not_found' : 'already_revoked';
}

/** Who a presented key belongs to. */
export interface KeyOwner {
  readonly tenantId: string;
  readonly isAdmin: boolean;
}

/** Looks up the tenant of a presented key; `undefined` for unknown or revoked keys. */
export async function findKeyOwner(executor: Executor, key: string): Promise<KeyOwner | undefined> {
  return (await findKeyOwners(executor, [key])).get(key);
}

/**
 * {@link findKeyOwner} for several keys in one statement (the gateway's lookups of concurrent
 * calls): the owner of each key found, by key; unknown and revoked keys are left out.
 */
export async function findKeyOwners(
  executor: Executor,
  keys: readonly string[],
): Promise<Map<string, KeyOwner>> {
  const byHash = new Map(keys.map((key) => [hashApiKey(key), key]));
  const owners = new Map<string, KeyOwner>();
  if (byHash.size === 0) return owners;
  const rows = await executor.execute<{ key_hash: string; tenant_id: string; is_admin: boolean }>(
    keyOwnersStatement([...byHash.keys()]),
  );
  for (const row of rows) {
    const key = byHash.get(row.key_hash);
    if (key !== undefined) owners.set(key, { tenantId: row.tenant_id, isAdmin: row.is_admin });
  }
  return owners;
}

/** The read of {@link findKeyOwners}: the live keys among `keyHashes`, with their owners. */
export function keyOwnersStatement(keyHashes: readonly string[]): SQL {
  // Written out rather than built: every call of the API reads its key, and the query builder
  // costs about as much CPU as the rest of the read.
  return sql`
    select key_hash, tenant_id, is_admin from api_keys
    where key_hash = any(${textArrayOf(keyHashes)}) and revoked_at is null`;
}

/** The SQLSTATE of a Postgres error, also when drizzle wrapped it (as `cause`). */
function sqlStateOf(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e instanceof Error; depth++, e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/**
 * Tenants and their API keys. Keys are random secrets shown once; only their SHA-256 is stored, so a
 * leaked database does not leak keys.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, eq, isNull } from 'drizzle-orm';
import { SluiceError, tenantIdProblem } from '@sluice/core';
import type { Executor } from '../client.js';
import { apiKeys, tenants } from '../schema.js';

/** Every key starts with this, so a leaked key is recognisable by secret scanners. */
const KEY_PREFIX = 'slk_';

/** SHA-256 (hex) of an API key, as stored. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Creates a tenant; an existing id is an `already_exists` {@link SluiceError}. */
export async function createTenant(
  executor: Executor,
  tenant: { id: string; name?: string },
): Promise<void> {
  const problem = tenantIdProblem(tenant.id);
  if (problem) throw new SluiceError('invalid_argument', problem, { field: 'tenant_id' });
  const inserted = await executor
    .insert(tenants)
    .values({ id: tenant.id, name: tenant.name ?? tenant.id })
    .onConflictDoNothing()
    .returning({ id: tenants.id });
  if (inserted.length === 0) {
    throw new SluiceError('already_exists', `tenant ${tenant.id} exists already`);
  }
}

/** Creates a new API key for a tenant and returns the secret (the only time it is visible). */
export async function createApiKey(
  executor: Executor,
  options: { tenantId: string; isAdmin?: boolean },
): Promise<string> {
  const key = `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
  await executor.insert(apiKeys).values({
    tenantId: options.tenantId,
    keyHash: hashApiKey(key),
    keyPrefix: key.slice(0, KEY_PREFIX.length + 6),
    isAdmin: options.isAdmin ?? false,
  });
  return key;
}

/** Who a presented key belongs to. */
export interface KeyOwner {
  readonly tenantId: string;
  readonly isAdmin: boolean;
}

/** Looks up the tenant of a presented key; `undefined` for unknown or revoked keys. */
export async function findKeyOwner(executor: Executor, key: string): Promise<KeyOwner | undefined> {
  const rows = await executor
    .select({ tenantId: apiKeys.tenantId, isAdmin: apiKeys.isAdmin })
    .from(apiKeys)
    .where(and(eq(apiKeys.keyHash, hashApiKey(key)), isNull(apiKeys.revokedAt)))
    .limit(1);
  return rows[0];
}

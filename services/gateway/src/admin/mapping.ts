/**
 * Stored tenants and keys to their `sluice.v1` wire shapes. A key's hash never reaches this
 * module (`ApiKeyRecord` has none), so it cannot end up in a response.
 */
import { toTimestamp, type ApiKey, type Tenant } from '@sluice/api';
import type { ApiKeyRecord, TenantRecord } from '@sluice/db';

/** `sluice.v1.Tenant` of a stored tenant. */
export function tenantToApi(tenant: TenantRecord): Tenant {
  return {
    tenant_id: tenant.id,
    display_name: tenant.name,
    create_time: toTimestamp(tenant.createdAt),
  };
}

/** `sluice.v1.ApiKey` of a stored key. */
export function apiKeyToApi(key: ApiKeyRecord): ApiKey {
  return {
    key_id: key.id,
    tenant_id: key.tenantId,
    prefix: key.keyPrefix,
    admin: key.isAdmin,
    create_time: toTimestamp(key.createdAt),
    revoke_time: key.revokedAt === null ? null : toTimestamp(key.revokedAt),
  };
}

/**
 * A typed client of `sluice.v1.AdminService`: tenants, their API keys, and dead letters. It needs an admin key
 * (a tenant's ordinary key is refused with `PERMISSION_DENIED`). Failures are grpc-js
 * `ServiceError`s, as for the task client.
 */
import {
  ADMIN_SERVICE_PROTO,
  type CreateApiKeyResponse,
  type CreateTenantResponse,
  type ListApiKeysResponse,
  type ListDeadLettersRequest,
  type ListDeadLettersResponse,
  type ListTenantsRequest,
  type ListTenantsResponse,
  type PurgeDeadLettersResponse,
  type RedriveDeadLettersResponse,
  type RevokeApiKeyResponse,
} from '@sluice/api';
import { connect, type ClientOptions } from './connection.js';

/** Where the gateway is; `apiKey` must be an admin key. */
export type AdminClientOptions = ClientOptions;

/** The typed admin client. Every method rejects with the grpc-js `ServiceError` of a refused call. */
export interface AdminClient {
  /** Creates a tenant (without keys); `displayName` defaults to the id on the server. */
  createTenant(tenantId: string, displayName?: string): Promise<CreateTenantResponse>;
  /** One page of tenants in id order; pass `next_page_token` back for the next. */
  listTenants(request?: Partial<ListTenantsRequest>): Promise<ListTenantsResponse>;
  /** Creates a key for a tenant; the response's `secret` is shown only now. */
  createApiKey(
    tenantId: string,
    options?: { readonly admin?: boolean },
  ): Promise<CreateApiKeyResponse>;
  /** A tenant's keys, revoked ones included, without secrets. */
  listApiKeys(tenantId: string): Promise<ListApiKeysResponse>;
  /** Revokes a key at once. */
  revokeApiKey(keyId: string): Promise<RevokeApiKeyResponse>;
  /** One page of dead letters, oldest first, optionally of one tenant (`tenant_id`). */
  listDeadLetters(request?: Partial<ListDeadLettersRequest>): Promise<ListDeadLettersResponse>;
  /** Retries the letters' tasks; one result per distinct id (partial success is normal). */
  redriveDeadLetters(ids: readonly string[]): Promise<RedriveDeadLettersResponse>;
  /** Deletes letters; the response names those that existed. */
  purgeDeadLetters(ids: readonly string[]): Promise<PurgeDeadLettersResponse>;
  close(): void;
}

/** Creates an admin client; it connects lazily, on the first call. */
export function createAdminClient(options: AdminClientOptions): AdminClient {
  const { unary, close } = connect(ADMIN_SERVICE_PROTO, 'sluice.v1.AdminService', options);
  return {
    createTenant: (tenantId, displayName = '') =>
      unary('CreateTenant', { tenant_id: tenantId, display_name: displayName }),
    listTenants: (request = {}) => unary('ListTenants', request),
    createApiKey: (tenantId, { admin = false } = {}) =>
      unary('CreateApiKey', { tenant_id: tenantId, admin }),
    listApiKeys: (tenantId) => unary('ListApiKeys', { tenant_id: tenantId }),
    revokeApiKey: (keyId) => unary('RevokeApiKey', { key_id: keyId }),
    listDeadLetters: (request = {}) => unary('ListDeadLetters', request),
    redriveDeadLetters: (ids) => unary('RedriveDeadLetters', { dead_letter_ids: [...ids] }),
    purgeDeadLetters: (ids) => unary('PurgeDeadLetters', { dead_letter_ids: [...ids] }),
    close,
  };
}

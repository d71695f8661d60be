/**
 * A typed client of `sluice.v1.AdminService`: tenants, their API keys, dead letters, and the
 * governor's backpressure (what it decides, and overrides of it). It needs an admin key
 * (a tenant's ordinary key is refused with `PERMISSION_DENIED`). Failures are grpc-js
 * `ServiceError`s, as for the task client.
 */
import {
  ADMIN_SERVICE_PROTO,
  toDuration,
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
  type PressureLevel,
  type BreakerStatus,
  type OverrideKind,
  type SignalReading,
  type ResourceLimit,
  type AdmissionBreaker,
  type PressureDecision,
  type BreakerTransition,
  type Breaker,
  type Override,
  type GetPressureResponse,
  type SetOverrideResponse,
  type ClearOverrideResponse,
} from '@sluice/api';
import { connect, type ClientOptions } from './connection.js';

export type {
  PressureLevel,
  BreakerStatus,
  OverrideKind,
  SignalReading,
  ResourceLimit,
  AdmissionBreaker,
  PressureDecision,
  BreakerTransition,
  Breaker,
  Override,
  GetPressureResponse,
  SetOverrideResponse,
  ClearOverrideResponse,
};

/** What {@link AdminClient.setOverride} forces. */
export interface OverrideParams {
  readonly kind: OverrideKind;
  /** A resource (breaker, limit) or a priority `0`…`3` (priority). */
  readonly target: string;
  /** `open`|`closed` (breaker), `hold`|`release` (priority), an integer ≥ 1 (limit). */
  readonly value: string;
  readonly reason: string;
  /** How long it applies, in milliseconds; absent: until cleared (not finite: a `RangeError`). */
  readonly ttlMs?: number;
}

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
  /** The governor's live decision (and whether it is stale), the breakers, the overrides. */
  getPressure(): Promise<GetPressureResponse>;
  /** Forces a breaker, a priority or a limit; replaces the active override of that target. */
  setOverride(override: OverrideParams): Promise<SetOverrideResponse>;
  /** Clears an active override (`NOT_FOUND` when none has this id). */
  clearOverride(overrideId: string): Promise<ClearOverrideResponse>;
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
    getPressure: () => unary('GetPressure', {}),
    // Async: a ttlMs no Duration can carry (Infinity, NaN) rejects like a refused call would.
    setOverride: async ({ kind, target, value, reason, ttlMs }) =>
      unary('SetOverride', {
        kind,
        target,
        value,
        reason,
        ...(ttlMs === undefined ? {} : { ttl: toDuration(ttlMs) }),
      }),
    clearOverride: (overrideId) => unary('ClearOverride', { override_id: overrideId }),
    close,
  };
}

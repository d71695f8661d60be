/**
 * The TypeScript shapes of `sluice.v1.AdminService` (`proto/sluice/v1/admin_service.proto`), by
 * the same rules as `api-types.ts`: proto field names (snake_case), proto3 defaults present on
 * received messages, an unset message field is `null`.
 */
import type { TaskError, TaskEvent, TaskStatus, Timestamp } from './api-types.js';

/** The file that declares `sluice.v1.AdminService`, relative to `PROTO_ROOT`. */
export const ADMIN_SERVICE_PROTO = 'sluice/v1/admin_service.proto';

/** `sluice.v1.Tenant`. */
export interface Tenant {
  tenant_id: string;
  /** The tenant id when none was given at creation. */
  display_name: string;
  create_time: Timestamp | null;
}

/** `sluice.v1.ApiKey`: a key described without its secret. */
export interface ApiKey {
  /** A UUID. */
  key_id: string;
  tenant_id: string;
  /** The first characters of the secret (`slk_` and six more). */
  prefix: string;
  /** Whether the key may call AdminService. */
  admin: boolean;
  create_time: Timestamp | null;
  /** `null` while the key is valid. */
  revoke_time: Timestamp | null;
}

/** `sluice.v1.CreateTenantRequest`, as received. */
export interface CreateTenantRequest {
  tenant_id: string;
  /** `''` for the default (the tenant id). */
  display_name: string;
}

/** `sluice.v1.CreateTenantResponse`. */
export interface CreateTenantResponse {
  tenant: Tenant;
}

/** `sluice.v1.ListTenantsRequest`, as received. */
export interface ListTenantsRequest {
  /** 0 for the server's default. */
  page_size: number;
  /** `''` for the first page. */
  page_token: string;
}

/** `sluice.v1.ListTenantsResponse`. */
export interface ListTenantsResponse {
  tenants: Tenant[];
  /** `''` on the last page. */
  next_page_token: string;
}

/** `sluice.v1.CreateApiKeyRequest`, as received. */
export interface CreateApiKeyRequest {
  tenant_id: string;
  admin: boolean;
}

/** `sluice.v1.CreateApiKeyResponse`. */
export interface CreateApiKeyResponse {
  key: ApiKey;
  /** The bearer secret; in this response only. */
  secret: string;
}

/** `sluice.v1.ListApiKeysRequest`, as received. */
export interface ListApiKeysRequest {
  tenant_id: string;
}

/** `sluice.v1.ListApiKeysResponse`. */
export interface ListApiKeysResponse {
  /** Oldest first, revoked keys included. */
  keys: ApiKey[];
}

/** `sluice.v1.RevokeApiKeyRequest`, as received. */
export interface RevokeApiKeyRequest {
  key_id: string;
}

/** `sluice.v1.RevokeApiKeyResponse`. */
export interface RevokeApiKeyResponse {
  key: ApiKey;
}

/** `sluice.v1.DeadLetterReason`. */
export type DeadLetterReason =
  | 'DEAD_LETTER_REASON_UNSPECIFIED'
  | 'DEAD_LETTER_REASON_ATTEMPTS_EXHAUSTED'
  | 'DEAD_LETTER_REASON_MAX_DELIVERIES'
  | 'DEAD_LETTER_REASON_TERMINATED';

/** `sluice.v1.DeadLetter`: work no automatic retry reaches any more. */
export interface DeadLetter {
  /** A UUID. */
  dead_letter_id: string;
  task_id: string;
  tenant_id: string;
  step: string;
  step_seq: number;
  reason: DeadLetterReason;
  error: TaskError | null;
  attempts: number;
  create_time: Timestamp | null;
  /** `null` while the letter waits for a redrive. */
  redrive_time: Timestamp | null;
  task_status: TaskStatus;
  /** The task's latest events (at most 20), oldest first. */
  recent_events: TaskEvent[];
}

/** `sluice.v1.ListDeadLettersRequest`, as received. */
export interface ListDeadLettersRequest {
  /** 0 for the server's default. */
  page_size: number;
  /** `''` for the first page. */
  page_token: string;
  /** `''` for every tenant. */
  tenant_id: string;
}

/** `sluice.v1.ListDeadLettersResponse`. */
export interface ListDeadLettersResponse {
  /** Oldest first. */
  dead_letters: DeadLetter[];
  /** `''` on the last page. */
  next_page_token: string;
}

/** `sluice.v1.RedriveDeadLettersRequest`, as received. */
export interface RedriveDeadLettersRequest {
  dead_letter_ids: string[];
}

/** `sluice.v1.RedriveResult`: what a redrive did with one letter. */
export interface RedriveResult {
  dead_letter_id: string;
  /** `''` when the letter does not exist. */
  task_id: string;
  redriven: boolean;
  /** `''` when redriven. */
  reason: string;
}

/** `sluice.v1.RedriveDeadLettersResponse`. */
export interface RedriveDeadLettersResponse {
  /** One per requested id, in request order. */
  results: RedriveResult[];
}

/** `sluice.v1.PurgeDeadLettersRequest`, as received. */
export interface PurgeDeadLettersRequest {
  dead_letter_ids: string[];
}

/** `sluice.v1.PurgeDeadLettersResponse`. */
export interface PurgeDeadLettersResponse {
  /** The letters deleted; unknown ids are absent. */
  purged_ids: string[];
}

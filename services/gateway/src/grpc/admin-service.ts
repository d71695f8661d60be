/**
 * The contract between `sluice.v1.AdminService` and the handlers that implement it.
 */
import type {
  CreateApiKeyRequest,
  CreateApiKeyResponse,
  CreateTenantRequest,
  CreateTenantResponse,
  ListApiKeysRequest,
  ListApiKeysResponse,
  ListDeadLettersRequest,
  ListDeadLettersResponse,
  ListTenantsRequest,
  ListTenantsResponse,
  PurgeDeadLettersRequest,
  PurgeDeadLettersResponse,
  RedriveDeadLettersRequest,
  RedriveDeadLettersResponse,
  RevokeApiKeyRequest,
  RevokeApiKeyResponse,
  ClearOverrideRequest,
  ClearOverrideResponse,
  GetPressureRequest,
  GetPressureResponse,
  SetOverrideRequest,
  SetOverrideResponse,
} from '@sluice/api';
import type { UnaryMethod } from './handler-adapter.js';

/** The fully-qualified name of the admin service. */
export const ADMIN_SERVICE_NAME = 'sluice.v1.AdminService';

/**
 * The handlers of `sluice.v1.AdminService`, keyed by RPC name: like `TaskServiceHandlers`, each
 * receives the grpc-js call and a `CallContext`, and resolves with the response or rejects with a
 * `GrpcError`. Checking that the caller holds an admin key is the handlers' job.
 */
export interface AdminServiceHandlers {
  CreateTenant: UnaryMethod<CreateTenantRequest, CreateTenantResponse>;
  ListTenants: UnaryMethod<ListTenantsRequest, ListTenantsResponse>;
  CreateApiKey: UnaryMethod<CreateApiKeyRequest, CreateApiKeyResponse>;
  ListApiKeys: UnaryMethod<ListApiKeysRequest, ListApiKeysResponse>;
  RevokeApiKey: UnaryMethod<RevokeApiKeyRequest, RevokeApiKeyResponse>;
  ListDeadLetters: UnaryMethod<ListDeadLettersRequest, ListDeadLettersResponse>;
  RedriveDeadLetters: UnaryMethod<RedriveDeadLettersRequest, RedriveDeadLettersResponse>;
  PurgeDeadLetters: UnaryMethod<PurgeDeadLettersRequest, PurgeDeadLettersResponse>;
  GetPressure: UnaryMethod<GetPressureRequest, GetPressureResponse>;
  SetOverride: UnaryMethod<SetOverrideRequest, SetOverrideResponse>;
  ClearOverride: UnaryMethod<ClearOverrideRequest, ClearOverrideResponse>;
}

/** The name of an `AdminService` RPC. */
export type AdminServiceMethodName = keyof AdminServiceHandlers;

/** How each RPC streams; checked against the compiled descriptors when the API is loaded. */
export const ADMIN_SERVICE_METHOD_KINDS = {
  CreateTenant: 'unary',
  ListTenants: 'unary',
  CreateApiKey: 'unary',
  ListApiKeys: 'unary',
  RevokeApiKey: 'unary',
  ListDeadLetters: 'unary',
  RedriveDeadLetters: 'unary',
  PurgeDeadLetters: 'unary',
  GetPressure: 'unary',
  SetOverride: 'unary',
  ClearOverride: 'unary',
} as const satisfies Record<AdminServiceMethodName, 'unary' | 'server_streaming'>;

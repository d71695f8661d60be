/**
 * `@sluice/api` — the wire shapes of the gRPC API `sluice.v1`, shared by the gateway that serves
 * it and the SDK's client that calls it.
 *
 * @example
 * ```ts
 * import { toTimestamp, type Task } from '@sluice/api';
 * const created: Task['create_time'] = toTimestamp(new Date());
 * ```
 */
export {
  APPROVAL_TIMEOUT_ACTION_VALUES,
  ERROR_CLASS_VALUES,
  PRIORITY_VALUES,
  TASK_STATUS_VALUES,
  fromDuration,
  fromTimestamp,
  isWithinTimestampRange,
  toDuration,
  toTimestamp,
} from './api-types.js';
export type {
  ApprovalRequest,
  ApprovalTimeoutAction,
  ApproveTaskRequest,
  ApproveTaskResponse,
  CancelTaskRequest,
  CancelTaskResponse,
  CreateTaskRequest,
  CreateTaskResponse,
  CreateTasksRequest,
  CreateTasksResponse,
  Duration,
  ErrorClass,
  GetTaskRequest,
  GetTaskResponse,
  ListTasksRequest,
  ListTasksResponse,
  PauseTaskRequest,
  PauseTaskResponse,
  Priority,
  ReceivedEnum,
  ResumeTaskRequest,
  ResumeTaskResponse,
  RetryTaskRequest,
  RetryTaskResponse,
  Task,
  TaskError,
  TaskEvent,
  TaskStatus,
  Timestamp,
  WatchTaskRequest,
  WatchTaskResponse,
} from './api-types.js';
export { PROTO_LOADER_OPTIONS } from './proto-loader-options.js';
export { PROTO_ROOT, TASK_SERVICE_PROTO } from './proto-files.js';
export { ADMIN_SERVICE_PROTO } from './admin-types.js';
export type {
  AdmissionBreaker,
  Breaker,
  BreakerStatus,
  BreakerTransition,
  ClearOverrideRequest,
  ClearOverrideResponse,
  GetPressureRequest,
  GetPressureResponse,
  GuardCap,
  Override,
  OverrideKind,
  PressureDecision,
  PressureLevel,
  ResourceLimit,
  SetOverrideRequest,
  SetOverrideResponse,
  SignalReading,
} from './pressure-types.js';
export type {
  ApiKey,
  CreateApiKeyRequest,
  CreateApiKeyResponse,
  CreateTenantRequest,
  CreateTenantResponse,
  DeadLetter,
  DeadLetterReason,
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
  RedriveResult,
  RevokeApiKeyRequest,
  RevokeApiKeyResponse,
  Tenant,
} from './admin-types.js';

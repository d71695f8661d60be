/**
 * The TypeScript shapes of AdminService's backpressure messages (`GetPressure`, `SetOverride`,
 * `ClearOverride` in `proto/sluice/v1/admin_service.proto`), by the rules of `api-types.ts`: proto
 * field names, enums as their names, int64 as decimal strings, an unset message field `null`.
 */
import type { Duration, Priority, ReceivedEnum, Timestamp } from './api-types.js';

/** `sluice.v1.PressureLevel`. */
export type PressureLevel =
  | 'PRESSURE_LEVEL_UNSPECIFIED'
  | 'PRESSURE_LEVEL_NORMAL'
  | 'PRESSURE_LEVEL_THROTTLE'
  | 'PRESSURE_LEVEL_DEGRADE'
  | 'PRESSURE_LEVEL_HOLD'
  | 'PRESSURE_LEVEL_REJECT';

/** `sluice.v1.BreakerStatus`. */
export type BreakerStatus =
  | 'BREAKER_STATUS_UNSPECIFIED'
  | 'BREAKER_STATUS_CLOSED'
  | 'BREAKER_STATUS_OPEN'
  | 'BREAKER_STATUS_HALF_OPEN';

/** `sluice.v1.OverrideKind`. */
export type OverrideKind =
  | 'OVERRIDE_KIND_UNSPECIFIED'
  | 'OVERRIDE_KIND_BREAKER'
  | 'OVERRIDE_KIND_PRIORITY'
  | 'OVERRIDE_KIND_LIMIT';

/** `sluice.v1.SignalReading`. */
export interface SignalReading {
  signal: string;
  scope: string;
  value: number;
  level: string;
}

/** `sluice.v1.ResourceLimit`. */
export interface ResourceLimit {
  resource: string;
  limit: number;
}

/** `sluice.v1.AdmissionBreaker`. */
export interface AdmissionBreaker {
  resource: string;
  status: BreakerStatus;
}

/** `sluice.v1.PressureDecision`. */
export interface PressureDecision {
  level: PressureLevel;
  decide_time: Timestamp | null;
  holds: Priority[];
  rejects: Priority[];
  /** `null` when nothing is rejected. */
  retry_after: Duration | null;
  throttles: Priority[];
  degrades: Priority[];
  /** In the order of their resources. */
  limits: ResourceLimit[];
  /** Breakers that are not closed, as admission sees them, in the order of their resources. */
  breakers: AdmissionBreaker[];
  signals: SignalReading[];
  reasons: string[];
  /** int64, as a decimal string. */
  epoch: string;
  holder: string;
}

/** `sluice.v1.BreakerTransition`. */
export interface BreakerTransition {
  from_status: BreakerStatus;
  to_status: BreakerStatus;
  reason: string;
  transition_time: Timestamp | null;
  /** int64, as a decimal string. */
  epoch: string;
}

/** `sluice.v1.Breaker`. */
export interface Breaker {
  resource: string;
  status: BreakerStatus;
  /** `''` when it never opened. */
  reason: string;
  cool_down_end_time: Timestamp | null;
  change_time: Timestamp | null;
  /** Newest first. */
  recent_transitions: BreakerTransition[];
}

/** `sluice.v1.Override`. */
export interface Override {
  override_id: string;
  kind: OverrideKind;
  target: string;
  value: string;
  reason: string;
  create_time: Timestamp | null;
  /** `null`: until cleared. */
  expire_time: Timestamp | null;
}

/** `sluice.v1.GuardCap`. */
export interface GuardCap {
  resource: string;
  /** 0: lower priorities held there. */
  cap: number;
}

/** `sluice.v1.GetPressureRequest`. */
export type GetPressureRequest = Record<string, never>;

/** `sluice.v1.GetPressureResponse`. */
export interface GetPressureResponse {
  /** `null` when the governor bucket holds no decision. */
  decision: PressureDecision | null;
  stale: boolean;
  breakers: Breaker[];
  overrides: Override[];
  /** In the order of their resources. */
  guard_caps: GuardCap[];
}

/** `sluice.v1.SetOverrideRequest`, as received. */
export interface SetOverrideRequest {
  kind: ReceivedEnum<OverrideKind>;
  target: string;
  value: string;
  reason: string;
  /** `null`: until cleared. */
  ttl: Duration | null;
}

/** `sluice.v1.SetOverrideResponse`. */
export interface SetOverrideResponse {
  override: Override;
}

/** `sluice.v1.ClearOverrideRequest`, as received. */
export interface ClearOverrideRequest {
  override_id: string;
}

/** `sluice.v1.ClearOverrideResponse`. */
export type ClearOverrideResponse = Record<string, never>;

/**
 * AdminService's backpressure RPCs: `GetPressure` (what the governor decides and why, its breakers,
 * the overrides in force and the schedulers' urgent-wait guard caps) and `SetOverride` /
 * `ClearOverride` (a person forcing its hand).
 *
 * The gateway never decides anything here: the decision is read from the governor bucket as the
 * governor wrote it, breakers and overrides from Postgres. Overrides are written to Postgres only;
 * the governor reads the active ones every tick, so an override takes effect within about one
 * governor interval, and survives every restart.
 */
import {
  fromDuration,
  toDuration,
  toTimestamp,
  type Duration,
  type Priority as ApiPriority,
} from '@sluice/api';
import {
  DECISIONS_KEY,
  DEFAULT_DECISION_STALE_MS,
  decodeDecision,
  isMissingGovernorBucket,
  type BreakerView,
  type GovernorBucketReader,
  type GovernorDecision,
  type GuardCapsView,
} from '@sluice/bus';
import {
  SluiceErrorCode,
  isSluiceError,
  type BreakerStatus as CoreBreakerStatus,
  type Priority,
} from '@sluice/core';
import {
  activeOverrides,
  addOverride,
  clearOverride,
  loadBreakers,
  recentBreakerTransitions,
  type BreakerTransitionRecord,
  type Database,
  type GovernorOverrideKind,
  type Override as StoredOverride,
  type StoredBreaker,
} from '@sluice/db';
import type { Logger } from '@sluice/telemetry';
import { invalidArgument, notFound } from '../grpc/index.js';
import type { AdminServiceHandlers } from '../grpc/admin-service.js';
import { authenticateAdmin } from './admin-auth.js';
import type {
  Breaker,
  BreakerStatus,
  Override,
  OverrideKind,
  PressureDecision,
  PressureLevel,
  SetOverrideRequest,
} from '@sluice/api';

/** What the pressure handlers need. */
export interface PressureDeps {
  readonly db: Database;
  readonly log: Logger;
  /** The governor bucket, opened without creating it (it may not exist yet). */
  readonly governorKv: GovernorBucketReader;
  /** Age after which the decision counts as stale (default {@link DEFAULT_DECISION_STALE_MS}). */
  readonly decisionStaleMs?: number;
  /** The schedulers' urgent-wait guard caps (none shown without it). */
  readonly guardCaps?: GuardCapsView;
  /** The clock, for tests. */
  readonly now?: () => number;
}

/** How many transitions `GetPressure` shows per breaker. */
export const RECENT_BREAKER_TRANSITIONS = 10;
/** Longest accepted override reason, in characters (code points). */
export const MAX_OVERRIDE_REASON_LENGTH = 500;
/** Longest accepted override TTL: overrides meant to last longer are set without one. */
export const MAX_OVERRIDE_TTL_MS = 365 * 24 * 60 * 60 * 1_000;
/** Largest value of a Postgres `bigint`, the type of override ids. */
const MAX_BIGINT = 2n ** 63n - 1n;
/** Largest value of the wire's `int32` limits. */
const MAX_INT32 = 2 ** 31 - 1;

/** The pressure handlers, to be spread into the AdminService handlers. */
export type PressureHandlers = Pick<
  AdminServiceHandlers,
  'GetPressure' | 'SetOverride' | 'ClearOverride'
>;

/** Creates the `GetPressure`, `SetOverride` and `ClearOverride` handlers. */
export function createPressureHandlers(deps: PressureDeps): PressureHandlers {
  const { db, log } = deps;
  const staleAfterMs = deps.decisionStaleMs ?? DEFAULT_DECISION_STALE_MS;
  const now = deps.now ?? Date.now;

  return {
    async GetPressure(call) {
      await authenticateAdmin(db, call.metadata);
      const [decision, breakers, overrides] = await Promise.all([
        readDecision(deps.governorKv, log),
        loadBreakers(db),
        activeOverrides(db),
      ]);
      const transitions = await Promise.all(
        breakers.map((b) =>
          recentBreakerTransitions(db, { resource: b.resource, limit: RECENT_BREAKER_TRANSITIONS }),
        ),
      );
      return {
        decision: decision === undefined ? null : decisionToApi(decision),
        stale: decision === undefined || now() - Date.parse(decision.decided_at) > staleAfterMs,
        breakers: breakers.map((b, i) => breakerToApi(b, transitions[i] ?? [])),
        overrides: overrides.map(overrideToApi),
        guard_caps: Object.entries(deps.guardCaps?.all() ?? {}).map(([resource, cap]) => ({
          resource,
          cap,
        })),
      };
    },

    async SetOverride(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const request = call.request;
      const kind = overrideKindFromApi(request.kind);
      if (kind === undefined) {
        throw invalidArgument('kind', 'kind must be BREAKER, PRIORITY or LIMIT');
      }
      if ([...request.reason].length > MAX_OVERRIDE_REASON_LENGTH) {
        throw invalidArgument(
          'reason',
          `reason must be at most ${MAX_OVERRIDE_REASON_LENGTH} characters`,
        );
      }
      const ttlMs = overrideTtlMs(request.ttl);
      let created: StoredOverride;
      try {
        created = await addOverride(db, {
          kind,
          target: request.target,
          value: request.value,
          reason: request.reason,
          ...(ttlMs === undefined ? {} : { ttlMs }),
        });
      } catch (error) {
        throw asInvalidArgument(error);
      }
      log.info(
        {
          override_id: created.id,
          kind,
          target: created.target,
          value: created.value,
          reason: created.reason,
          expires_at: created.expiresAt?.toISOString() ?? null,
          by_tenant: caller.tenantId,
        },
        'governor override set',
      );
      return { override: overrideToApi(created) };
    },

    async ClearOverride(call) {
      const caller = await authenticateAdmin(db, call.metadata);
      const { override_id: id } = call.request;
      if (id === '') throw invalidArgument('override_id', 'override_id is required');
      if (!/^[1-9][0-9]{0,18}$/.test(id) || BigInt(id) > MAX_BIGINT) {
        throw invalidArgument('override_id', 'override_id must be a positive decimal number');
      }
      if (!(await clearOverride(db, id))) throw notFound(`no active override ${id}`);
      log.info({ override_id: id, by_tenant: caller.tenantId }, 'governor override cleared');
      return {};
    },
  };
}

/**
 * The decision in the governor bucket; `undefined` when there is none — the bucket does not exist
 * yet (no governor ever ran), holds no decision, or holds one that does not decode (logged; the
 * services ignore it too).
 */
async function readDecision(
  kv: GovernorBucketReader,
  log: Logger,
): Promise<GovernorDecision | undefined> {
  let entry;
  try {
    entry = await kv.get(DECISIONS_KEY);
  } catch (error) {
    if (isMissingGovernorBucket(error)) return undefined;
    throw error;
  }
  if (entry === null || entry.operation !== 'PUT') return undefined;
  try {
    return decodeDecision(entry.value);
  } catch (error) {
    log.warn({ err: error }, 'the governor bucket holds a malformed decision');
    return undefined;
  }
}

/** The most nanos of a `google.protobuf.Duration` (less than a second). */
const MAX_DURATION_NANOS = 999_999_999;

/**
 * How long an override lasts in milliseconds, `undefined` without a `ttl`. Its expiry is reckoned
 * by the write from its own time: one reckoned here, before the write, made a ttl of a few
 * milliseconds end at or before the override's creation (the table's check failed: INTERNAL), or
 * be refused as already past.
 */
export function overrideTtlMs(ttl: Duration | null): number | undefined {
  if (ttl === null) return undefined;
  if (Number(ttl.seconds) < 0 || ttl.nanos < 0)
    throw invalidArgument('ttl', 'ttl must be positive');
  // A Duration's nanos are a fraction of a second.
  if (!Number.isInteger(ttl.nanos) || ttl.nanos > MAX_DURATION_NANOS) {
    throw invalidArgument('ttl', `ttl.nanos must be between 0 and ${MAX_DURATION_NANOS}`);
  }
  const ms = fromDuration(ttl);
  if (!Number.isFinite(ms) || ms <= 0) {
    const underAMillisecond = ms === 0 && ttl.nanos > 0;
    throw invalidArgument(
      'ttl',
      underAMillisecond ? 'ttl must be at least 1 ms' : 'ttl must be positive',
    );
  }
  if (ms > MAX_OVERRIDE_TTL_MS) {
    throw invalidArgument('ttl', 'ttl must be at most 365 days; set no ttl to last until cleared');
  }
  return ms;
}

/** `INVALID_ARGUMENT` naming the request field of a validation error; anything else unchanged. */
function asInvalidArgument(error: unknown): unknown {
  if (!isSluiceError(error, SluiceErrorCode.InvalidArgument) || error.field === undefined) {
    return error;
  }
  return invalidArgument(error.field, error.message);
}

const OVERRIDE_KINDS: Readonly<Record<GovernorOverrideKind, OverrideKind>> = {
  breaker: 'OVERRIDE_KIND_BREAKER',
  priority: 'OVERRIDE_KIND_PRIORITY',
  limit: 'OVERRIDE_KIND_LIMIT',
};

/** The stored kind of a received `OverrideKind`; `undefined` for unspecified or unknown ones. */
function overrideKindFromApi(kind: SetOverrideRequest['kind']): GovernorOverrideKind | undefined {
  const entry = Object.entries(OVERRIDE_KINDS).find(([, api]) => api === kind);
  return entry?.[0] as GovernorOverrideKind | undefined;
}

/** `sluice.v1.Override` of a stored override. */
export function overrideToApi(override: StoredOverride): Override {
  return {
    override_id: override.id,
    kind: OVERRIDE_KINDS[override.kind],
    target: override.target,
    value: override.value,
    reason: override.reason,
    create_time: toTimestamp(override.createdAt),
    expire_time: override.expiresAt === null ? null : toTimestamp(override.expiresAt),
  };
}

const BREAKER_STATUSES: Readonly<Record<CoreBreakerStatus, BreakerStatus>> = {
  closed: 'BREAKER_STATUS_CLOSED',
  open: 'BREAKER_STATUS_OPEN',
  half_open: 'BREAKER_STATUS_HALF_OPEN',
};

/** `sluice.v1.Breaker` of a stored breaker and its latest transitions (newest first). */
export function breakerToApi(
  breaker: StoredBreaker,
  transitions: readonly BreakerTransitionRecord[],
): Breaker {
  return {
    resource: breaker.resource,
    status: BREAKER_STATUSES[breaker.status],
    reason: breaker.state.reason ?? '',
    cool_down_end_time: breaker.coolDownUntil === null ? null : toTimestamp(breaker.coolDownUntil),
    change_time: toTimestamp(breaker.changedAt),
    recent_transitions: transitions.map((t) => ({
      from_status: BREAKER_STATUSES[t.from],
      to_status: BREAKER_STATUSES[t.to],
      reason: t.reason,
      transition_time: toTimestamp(t.at),
      epoch: String(t.epoch),
    })),
  };
}

/** `PRIORITY_P0` … `PRIORITY_P3` of the governor's priorities 0 … 3. */
function prioritiesToApi(priorities: readonly Priority[] | undefined): ApiPriority[] {
  return (priorities ?? []).map((p) => `PRIORITY_P${p}` as ApiPriority);
}

/** `sluice.v1.PressureDecision` of a decoded decision document. */
export function decisionToApi(decision: GovernorDecision): PressureDecision {
  const retryAfterMs = decision.retry_after_ms ?? 0;
  const byResource = <T>([a]: [string, T], [b]: [string, T]) => (a < b ? -1 : a > b ? 1 : 0);
  const limits = Object.entries(decision.limits ?? {})
    .sort(byResource)
    .map(([resource, limit]) => ({ resource, limit: Math.min(limit, MAX_INT32) }));
  const breakers = Object.entries<BreakerView>(decision.breakers ?? {})
    .sort(byResource)
    .map(([resource, view]) => ({ resource, status: BREAKER_STATUSES[view] }));
  return {
    level: `PRESSURE_LEVEL_${decision.level.toUpperCase()}` as PressureLevel,
    decide_time: toTimestamp(new Date(decision.decided_at)),
    holds: prioritiesToApi(decision.holds),
    rejects: prioritiesToApi(decision.reject),
    retry_after: retryAfterMs > 0 ? toDuration(retryAfterMs) : null,
    throttles: prioritiesToApi(decision.throttle),
    degrades: prioritiesToApi(decision.degrade),
    limits,
    breakers,
    signals: (decision.signals ?? []).map((s) => ({ ...s })),
    reasons: [...decision.reasons],
    epoch: String(decision.epoch),
    holder: decision.holder,
  };
}

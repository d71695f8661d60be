/**
 * Manual overrides of the governor (`governor_overrides`): what a person forces through
 * `AdminService` — a breaker open or closed, a priority held or released, a resource's concurrency
 * pinned — with a reason, and optionally an expiry. The governor reads the active ones every tick
 * and lets them win over its own decisions.
 *
 * At most one uncleared override exists per (kind, target) (a partial unique index): adding one
 * clears the previous, so the newest wins. Rows are never deleted here: cleared and expired ones are
 * the record of who overrode what, and why.
 */
import { sql } from 'drizzle-orm';
import { SluiceError, resourceProblem, unstorableCharacter } from '@sluice/core';
import type { Executor } from '../client.js';
import type { GovernorOverrideKind } from '../schema.js';

/** First key of the advisory lock that serialises {@link addOverride} per (kind, target). */
export const OVERRIDE_LOCK_NAMESPACE = 0x51c3_0007;

export const OVERRIDE_KINDS: readonly GovernorOverrideKind[] = ['breaker', 'priority', 'limit'];

/** Largest `limit` override (nine digits, so the value always fits an `integer` limit). */
export const MAX_OVERRIDE_LIMIT = 999_999_999;

/** An override as stored. */
export interface Override {
  /** bigint, as a string. */
  readonly id: string;
  readonly kind: GovernorOverrideKind;
  /** A resource (`breaker`, `limit`) or a priority `0`..`3` (`priority`). */
  readonly target: string;
  /** `open`|`closed` (`breaker`), `hold`|`release` (`priority`), a positive integer (`limit`). */
  readonly value: string;
  readonly reason: string;
  readonly createdAt: Date;
  /** When it stops applying; `null`: until cleared. */
  readonly expiresAt: Date | null;
}

/** What {@link addOverride} adds. */
export interface NewOverride {
  readonly kind: GovernorOverrideKind;
  readonly target: string;
  readonly value: string;
  readonly reason: string;
  readonly expiresAt?: Date | null;
  /**
   * How long it applies, in milliseconds from its write (instead of `expiresAt`): the expiry is
   * reckoned from the insert's own time, so a short one cannot end before it was stored.
   */
  readonly ttlMs?: number;
}

function invalid(message: string, field: string): SluiceError {
  return new SluiceError('invalid_argument', message, { field });
}

/**
 * Checks an override before it is stored (the table's check constraints repeat the essentials).
 *
 * @throws SluiceError `invalid_argument` naming the field at fault (`kind`, `target`, `value`,
 *   `reason`, `expires_at`, `ttl`).
 */
export function validateOverride(override: NewOverride): void {
  const { kind, target, value, reason, expiresAt, ttlMs } = override;
  switch (kind) {
    case 'breaker':
    case 'limit': {
      const problem = resourceProblem(target);
      if (problem !== undefined) throw invalid(problem, 'target');
      if (kind === 'breaker' && value !== 'open' && value !== 'closed') {
        throw invalid(`a breaker override is "open" or "closed", not "${value}"`, 'value');
      }
      if (kind === 'limit' && !/^[1-9][0-9]{0,8}$/.test(value)) {
        throw invalid(
          `a limit override is an integer from 1 to ${MAX_OVERRIDE_LIMIT}, not "${value}"`,
          'value',
        );
      }
      break;
    }
    case 'priority':
      if (!['0', '1', '2', '3'].includes(target)) {
        throw invalid(`a priority override targets 0, 1, 2 or 3, not "${target}"`, 'target');
      }
      if (value !== 'hold' && value !== 'release') {
        throw invalid(`a priority override is "hold" or "release", not "${value}"`, 'value');
      }
      break;
    default:
      throw invalid(`override kind must be one of ${OVERRIDE_KINDS.join(', ')}`, 'kind');
  }
  if (typeof reason !== 'string' || reason.trim().length === 0) {
    throw invalid('an override needs a reason', 'reason');
  }
  // Valid on the wire, but a `text` column cannot hold U+0000: the insert failed (INTERNAL).
  const unstorable = unstorableCharacter(reason);
  if (unstorable !== undefined) {
    const what = unstorable === 'nul' ? 'the character U+0000 (NUL)' : 'an unpaired surrogate';
    throw invalid(`reason holds ${what}, which cannot be stored; remove or replace it`, 'reason');
  }
  if (expiresAt !== undefined && expiresAt !== null) {
    if (!(expiresAt instanceof Date) || Number.isNaN(expiresAt.getTime())) {
      throw invalid('expires_at is not a valid time', 'expires_at');
    }
    if (expiresAt.getTime() <= Date.now()) {
      throw invalid('expires_at must be in the future', 'expires_at');
    }
  }
  if (ttlMs !== undefined) {
    if (expiresAt !== undefined && expiresAt !== null) {
      throw invalid('give expires_at or ttl, not both', 'ttl');
    }
    // At least a microsecond: the column's resolution, so the expiry comes after the write.
    if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs < 0.001) {
      throw invalid('ttl must be positive', 'ttl');
    }
  }
}

interface OverrideRow extends Record<string, unknown> {
  id: string;
  kind: GovernorOverrideKind;
  target: string;
  value: string;
  reason: string;
  created_at: Date | string;
  expires_at: Date | string | null;
}

const OVERRIDE_COLUMNS = sql`id::text as id, kind, target, value, reason, created_at, expires_at`;

function toOverride(row: OverrideRow): Override {
  return {
    id: row.id,
    kind: row.kind,
    target: row.target,
    value: row.value,
    reason: row.reason,
    createdAt: new Date(row.created_at),
    expiresAt: row.expires_at === null ? null : new Date(row.expires_at),
  };
}

/**
 * Adds an override, clearing the uncleared one of the same (kind, target) — active or expired but
 * not yet swept — in the same transaction, so the newest wins. Concurrent adds of one (kind,
 * target) are serialised by a transaction-scoped advisory lock: each clears its predecessor
 * instead of failing on the unique index.
 *
 * @throws SluiceError `invalid_argument` (see {@link validateOverride}).
 */
export async function addOverride(executor: Executor, override: NewOverride): Promise<Override> {
  validateOverride(override);
  const { kind, target, value, reason } = override;
  // An ISO string: drizzle's postgres-js driver passes Date parameters through unserialised.
  // A ttl counts from the insert's now(), which is also its created_at: the expiry is later (a
  // time reckoned on the caller's clock before the write could fall at or before created_at,
  // which the table's check refuses).
  const expiresAt =
    override.ttlMs !== undefined
      ? sql`now() + ${override.ttlMs}::double precision * interval '1 millisecond'`
      : sql`${override.expiresAt ? override.expiresAt.toISOString() : null}::timestamptz`;
  return executor.transaction(async (tx) => {
    await tx.execute(sql`
      select pg_advisory_xact_lock(${OVERRIDE_LOCK_NAMESPACE}::int, hashtext(${`${kind}:${target}`}))
    `);
    await tx.execute(sql`
      update governor_overrides set cleared_at = now()
      where kind = ${kind} and target = ${target} and cleared_at is null
    `);
    const rows = await tx.execute<OverrideRow>(sql`
      insert into governor_overrides (kind, target, value, reason, expires_at)
      values (${kind}, ${target}, ${value}, ${reason}, ${expiresAt})
      returning ${OVERRIDE_COLUMNS}
    `);
    const row = rows[0];
    if (!row) throw new Error('insert into governor_overrides returned no row');
    return toOverride(row);
  });
}

/**
 * Clears an override. Returns whether it was active (an expired one not yet swept is cleared too,
 * but answers false: it no longer applied); false also for an unknown or already cleared id.
 */
export async function clearOverride(executor: Executor, id: string): Promise<boolean> {
  if (!/^[1-9][0-9]{0,18}$/.test(id)) return false;
  const rows = await executor.execute<{ active: boolean }>(sql`
    update governor_overrides set cleared_at = now()
    where id = ${id}::bigint and cleared_at is null
    returning (expires_at is null or expires_at > now()) as active
  `);
  return rows[0]?.active === true;
}

/** The overrides in force now: not cleared, not expired. Oldest first. */
export async function activeOverrides(executor: Executor): Promise<Override[]> {
  const rows = await executor.execute<OverrideRow>(sql`
    select ${OVERRIDE_COLUMNS} from governor_overrides
    where cleared_at is null and (expires_at is null or expires_at > now())
    order by created_at, id
  `);
  return rows.map(toOverride);
}

/** Marks expired, uncleared overrides cleared (the governor's sweep); returns how many. */
export async function clearExpiredOverrides(executor: Executor): Promise<number> {
  const rows = await executor.execute(sql`
    update governor_overrides set cleared_at = now()
    where cleared_at is null and expires_at <= now()
    returning id
  `);
  return rows.length;
}

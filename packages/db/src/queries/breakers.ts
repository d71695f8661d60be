/**
 * Circuit breakers (`breakers`, `breaker_transitions`): the one state per guarded resource that the
 * governor leader computes with `circuit-breaker.ts` in `@sluice/core` and stores here, so that a
 * new leader resumes it and an open breaker's cool-down survives every restart.
 *
 * Writes are fenced by the governor's leader epoch (`leader_epochs`, role
 * {@link GOVERNOR_LEADER_ROLE}): a write carrying any other epoch than the current one changes
 * nothing, so a governor paused past its lease cannot overwrite its successor's breakers.
 */
import { sql } from 'drizzle-orm';
import { SluiceError, type BreakerState, type BreakerStatus } from '@sluice/core';
import type { Executor } from '../client.js';

/** The `leader_epochs` role whose epoch fences breaker writes (the governor's). */
export const GOVERNOR_LEADER_ROLE = 'governor';

/** A breaker as stored. */
export interface StoredBreaker {
  readonly resource: string;
  readonly status: BreakerStatus;
  readonly state: BreakerState;
  /** When an open breaker's cool-down ends (`state.coolDownUntilMs`); `null` when none. */
  readonly coolDownUntil: Date | null;
  /** When `status` last changed. */
  readonly changedAt: Date;
  /** Leader epoch of the governor that wrote it. */
  readonly epoch: number;
}

/** What {@link saveBreaker} writes. */
export interface BreakerWrite {
  readonly resource: string;
  readonly state: BreakerState;
  /** The status change that produced `state`, recorded in `breaker_transitions`. */
  readonly transition?: {
    readonly from: BreakerStatus;
    readonly to: BreakerStatus;
    readonly reason: string;
  };
}

/** One recorded status change. */
export interface BreakerTransitionRecord {
  /** bigint, as a string. */
  readonly id: string;
  readonly resource: string;
  readonly from: BreakerStatus;
  readonly to: BreakerStatus;
  readonly reason: string;
  readonly epoch: number;
  readonly at: Date;
}

interface BreakerRow extends Record<string, unknown> {
  resource: string;
  status: BreakerStatus;
  state: BreakerState;
  cool_down_until: Date | string | null;
  changed_at: Date | string;
  epoch: string | number;
}

/** Every stored breaker (a new governor leader loads them once). */
export async function loadBreakers(executor: Executor): Promise<StoredBreaker[]> {
  const rows = await executor.execute<BreakerRow>(sql`
    select resource, status, state, cool_down_until, changed_at, epoch
    from breakers order by resource
  `);
  return rows.map((row) => ({
    resource: row.resource,
    status: row.status,
    state: row.state,
    coolDownUntil: row.cool_down_until === null ? null : new Date(row.cool_down_until),
    changedAt: new Date(row.changed_at),
    epoch: Number(row.epoch),
  }));
}

/**
 * Stores a breaker's state (and its transition, when given) if `epoch` is still the governor's
 * current leader epoch; returns false, having written nothing, otherwise. One statement: the fence,
 * the upsert and the transition commit together or not at all.
 *
 * The fence row is read `for share`, so a successor's `advanceLeaderEpoch` waits for this write to
 * commit (and then loads it), or this write sees the new epoch and stops — never a stale write
 * landing after the successor loaded. A row written by a greater epoch is never overwritten either.
 *
 * @throws SluiceError `invalid_argument` when the transition does not end in `state.status`.
 */
export async function saveBreaker(
  executor: Executor,
  write: BreakerWrite,
  epoch: number,
): Promise<boolean> {
  const { resource, state, transition } = write;
  if (transition && transition.to !== state.status) {
    throw new SluiceError(
      'invalid_argument',
      `transition to ${transition.to} does not match the state's status ${state.status}`,
      { field: 'transition' },
    );
  }
  // An ISO string: drizzle's postgres-js driver passes Date parameters through unserialised.
  const coolDownUntil =
    state.coolDownUntilMs === null ? null : new Date(state.coolDownUntilMs).toISOString();
  const transitionRow = transition
    ? sql`insert into breaker_transitions (resource, from_status, to_status, reason, epoch)
          select resource, ${transition.from}, ${transition.to}, ${transition.reason}, ${epoch}::bigint
          from saved`
    : sql`select 1 where false`;
  const rows = await executor.execute<{ saved: number }>(sql`
    with fence as (
      select epoch from leader_epochs
      where role = ${GOVERNOR_LEADER_ROLE} and epoch = ${epoch}::bigint
      for share
    ),
    saved as (
      insert into breakers as b (resource, status, state, cool_down_until, epoch)
      select ${resource}, ${state.status}, ${JSON.stringify(state)}::jsonb,
        ${coolDownUntil}::timestamptz, ${epoch}::bigint
      from fence
      on conflict (resource) do update set
        status = excluded.status,
        state = excluded.state,
        cool_down_until = excluded.cool_down_until,
        epoch = excluded.epoch,
        changed_at = case when b.status = excluded.status then b.changed_at else now() end,
        updated_at = now()
      where b.epoch <= excluded.epoch
      returning resource
    ),
    recorded as (${transitionRow})
    select count(*)::int as saved from saved
  `);
  return (rows[0]?.saved ?? 0) > 0;
}

/** Resources whose breaker is open with its cool-down over at `now`: fire their cool-down. */
export async function dueBreakerCoolDowns(executor: Executor, now: Date): Promise<string[]> {
  const rows = await executor.execute<{ resource: string }>(sql`
    select resource from breakers
    where status = 'open' and cool_down_until <= ${now.toISOString()}::timestamptz
    order by cool_down_until, resource
  `);
  return rows.map((row) => row.resource);
}

/** The latest breaker transitions, newest first (of one resource, or of all). */
export async function recentBreakerTransitions(
  executor: Executor,
  query: { readonly resource?: string; readonly limit: number },
): Promise<BreakerTransitionRecord[]> {
  const rows = await executor.execute<{
    id: string;
    resource: string;
    from_status: BreakerStatus;
    to_status: BreakerStatus;
    reason: string;
    epoch: string | number;
    at: Date | string;
  }>(sql`
    select id::text as id, resource, from_status, to_status, reason, epoch, at
    from breaker_transitions
    where ${query.resource === undefined ? sql`true` : sql`resource = ${query.resource}`}
    order by at desc, id desc
    limit ${query.limit}
  `);
  return rows.map((row) => ({
    id: row.id,
    resource: row.resource,
    from: row.from_status,
    to: row.to_status,
    reason: row.reason,
    epoch: Number(row.epoch),
    at: new Date(row.at),
  }));
}

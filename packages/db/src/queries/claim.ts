/**
 * The scheduler's claim of ready steps: which due steps the admission rules let through (resource
 * limits, tenant caps, priorities with aging, the governor's holds, throttles and limits, the urgent
 * reserve), claimed and marked dispatched in the transaction that holds the admission locks.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import type { Transaction } from '../client.js';
import type { KeptConnection } from '../kept-connection.js';
import { rowsOf } from '../one-write.js';
import { genericPlansForTransaction } from './plan-cache.js';
import {
  ANY_RESOURCE,
  DEFAULT_RESOURCE_LIMIT,
  hasLowerPriorityCaps,
  heldAdmissionLocks,
  holdsAdmissionLock,
  admissionLockOf,
  lockAdmissionStatement,
  type AdmissionLockRow,
  resourceLimitOf,
  urgentSlotsOf,
} from './admission.js';

/** A step the scheduler claimed and must now publish. */
export interface ClaimedStep {
  readonly id: number;
  readonly taskId: string;
  readonly seq: number;
  readonly name: string;
  readonly resource: string;
  readonly tenantId: string;
  readonly priority: Priority;
  /** The dispatch number of this publication (1 for the first). */
  readonly dispatch: number;
  /** W3C `traceparent` of the task, so the dispatch continues the task's trace. */
  readonly traceParent: string | null;
}

/**
 * How the claim admits: the configured default limit and aging, and what the governor decided
 * (holds, throttles, its limits, open breakers).
 */
export interface AdmissionSettings {
  /** In-flight limit of a resource without a `resource_limits` row. */
  readonly defaultResourceLimit: number;
  /** A ready step gains one priority level per this many ms past its due time; 0: no aging. */
  readonly agingMs: number;
  /** Priorities not admitted at all (a governor hold). Aging does not lift a hold. */
  readonly heldPriorities?: readonly Priority[];
  /** Resources admitting nothing (open circuit breakers). */
  readonly closedResources?: readonly string[];
  /** Limits by resource below the configured ones (adaptive, overrides, half-open probes). */
  readonly resourceLimits?: Readonly<Record<string, number>>;
  /**
   * Priorities the governor throttles: they may not take the last `throttleReserve` share of a
   * resource's limit (rounded up, but always leaving them one slot: a throttle is not a hold), which
   * stays free for the others, so urgent work finds a slot at once.
   */
  readonly throttledPriorities?: readonly Priority[];
  /** Share of each resource's limit, in [0, 1], a throttled priority leaves free (default 0.25). */
  readonly throttleReserve?: number;
  /**
   * The urgent reserve: share of each resource's limit, in [0, 0.5], that must stay free after a
   * P1–P3 step is admitted; P0 may take every slot (rounded down, so a small limit keeps none;
   * see `urgentReserveSlots`). Default none.
   */
  readonly urgentReserve?: number;
  /**
   * The urgent-wait guard's caps, by resource: while a resource's P0 steps wait longer than their
   * target, P1–P3 steps are admitted there only while fewer P1–P3 steps than the cap are in flight
   * (P0 may still take every slot). It widens the urgent reserve to everything above the cap and
   * the P0 steps in flight.
   */
  readonly lowerPriorityCaps?: Readonly<Record<string, number>>;
}

/** Share of a resource's limit a throttled priority leaves free unless configured. */
export const DEFAULT_THROTTLE_RESERVE = 0.25;

/** Admission as configured by default (the scheduler passes its own configuration). */
export const DEFAULT_ADMISSION: AdmissionSettings = {
  defaultResourceLimit: DEFAULT_RESOURCE_LIMIT,
  agingMs: 30_000,
};

/**
 * Claims up to `limit` ready steps that are due and admitted, and marks them dispatched. A step is
 * admitted while its resource has fewer in-flight (dispatched + running) steps than its limit and
 * its tenant fewer than its cap on that resource; the most urgent go first (priority improved by
 * aging), and within a priority the tenant with the fewest in-flight steps relative to its floor.
 *
 * Two statements, in the caller's transaction (after one that has them run on generic plans):
 * {@link lockAdmissionStatement} locks each resource with due ready steps and room (so replicas
 * claiming the same resource take turns: the count stays true until the claim commits), then one
 * statement counts and claims. Steps of tasks being cancelled or paused, or not queued/running, are
 * left alone. Runs in a transaction: its admission locks hold
 * until the claim commits (outside one, each statement would release them at once).
 */
export async function claimReadySteps(
  tx: Transaction,
  limit: number,
  admission: AdmissionSettings = DEFAULT_ADMISSION,
): Promise<ClaimedStep[]> {
  return (await claimAdmission(tx, limit, admission)).steps;
}

/** What {@link claimAdmission} claimed, and what it saw. */
export interface AdmissionClaim {
  /** The claimed steps, now dispatched: most urgent first, then oldest. */
  readonly steps: ClaimedStep[];
  /** Resources whose due ready steps wait for a slot (see `AdmissionLock.full`). */
  readonly full: readonly string[];
  /**
   * Whether due ready steps of the resources it could claim in were left ready: by the room, a
   * tenant's cap, a reserve or the batch size, or because their task is being paused or cancelled.
   * False means a slot freed now would admit nothing there (held priorities and closed resources
   * are not counted: only a new decision of the governor releases them).
   */
  readonly leftBehind: boolean;
}

/**
 * {@link claimReadySteps}, telling also which resources it found full.
 *
 * The lock statement and the claim go out together, one round trip: Postgres runs the claim after
 * the lock statement, in a snapshot of its own, and the claim counts and claims only in the
 * resources whose admission lock this transaction now holds (the lock statement records them in
 * a transaction-local setting, `heldAdmissionLocks`). Were the claim ever to run first, it would
 * find none recorded and claim nothing: never too much.
 */
export async function claimAdmission(
  tx: Transaction,
  limit: number,
  admission: AdmissionSettings = DEFAULT_ADMISSION,
): Promise<AdmissionClaim> {
  const [planning, locking, claiming] = admissionClaimStatements(limit, admission);
  const [, lockRows, rows] = await Promise.all([
    tx.execute(planning),
    tx.execute<AdmissionLockRow>(locking),
    tx.execute<ClaimRow>(claiming),
  ]);
  return admissionClaimOf(lockRows, rows);
}

/**
 * {@link claimAdmission} as a transaction of its own on `connection`, `BEGIN`, its statements and
 * `COMMIT` in one write: one round trip where the pool's transaction takes two (the statements,
 * then the commit). The statements are the same; Postgres runs them in order, as above.
 *
 * @throws the first statement's error (the transaction rolled back), or the connection's.
 */
export async function claimAdmissionOn(
  connection: KeptConnection,
  limit: number,
  admission: AdmissionSettings = DEFAULT_ADMISSION,
): Promise<AdmissionClaim> {
  const [, locking, claiming] = await connection.transaction(
    admissionClaimStatements(limit, admission),
  );
  return admissionClaimOf(rowsOf(locking) as AdmissionLockRow[], rowsOf(claiming) as ClaimRow[]);
}

/**
 * The statements of a claim's transaction, in the order they run: generic plans for the rest (the
 * claim made once per connection, plan-cache.ts), the admission locks, the claim.
 */
function admissionClaimStatements(limit: number, admission: AdmissionSettings): [SQL, SQL, SQL] {
  return [
    genericPlansForTransaction(),
    lockAdmissionStatement(admission),
    claimReadyStepsStatement(limit, admission, 'locked'),
  ];
}

/** What a claim's lock statement and claim answered. */
function admissionClaimOf(
  lockRows: readonly AdmissionLockRow[],
  rows: readonly ClaimRow[],
): AdmissionClaim {
  const { full } = admissionLockOf(lockRows);
  return { steps: claimedStepsOf(rows), full, leftBehind: rows[0]?.left_behind ?? true };
}

/** A row of {@link claimReadyStepsStatement}: a claimed step, or the one row of an empty claim. */
export type ClaimRow =
  | {
      id: string;
      task_id: string;
      seq: number;
      name: string;
      resource: string;
      tenant_id: string;
      priority: number;
      dispatch_count: number;
      trace_parent: string | null;
      left_behind: boolean;
    }
  | { id: null; left_behind: boolean };

/** The steps a claim's rows name: most urgent first, then oldest. */
export function claimedStepsOf(rows: readonly ClaimRow[]): ClaimedStep[] {
  return rows
    .flatMap((row) =>
      row.id === null
        ? []
        : [
            {
              id: Number(row.id),
              taskId: row.task_id,
              seq: row.seq,
              name: row.name,
              resource: row.resource,
              tenantId: row.tenant_id,
              priority: row.priority as Priority,
              dispatch: row.dispatch_count,
              traceParent: row.trace_parent,
            },
          ],
    )
    .sort((a, b) => a.priority - b.priority || a.id - b.id);
}

/**
 * The counting and claiming statement of {@link claimReadySteps}: in the resources whose admission
 * lock the transaction holds (`locked`, what the dispatcher runs), or in every resource (`all`: for
 * the ready-queue benchmark's EXPLAIN, which takes no locks; the plan is otherwise the same).
 *
 * `position` is the tenant's in-flight count on the resource once this step is admitted too; a
 * step is admissible while `position <= cap`, and the resource admits the first `room` of them in
 * the order (effective priority, under floor first, position − floor, due time, id): water-filling
 * between tenants within a priority. The effective priority is the class's (resource and priority)
 * after aging by its oldest ready step, the same for every tenant in it. The governor's holds and
 * open breakers leave groups out, its limits lower `room`, and its throttles cap how many steps of
 * a priority one claim admits.
 */
export function claimReadyStepsStatement(
  limit: number,
  admission: AdmissionSettings = DEFAULT_ADMISSION,
  resources: 'locked' | 'all' = 'locked',
): SQL {
  // In `locked`, the admission locks (`lockAdmission`) this transaction holds, read once.
  const onlyResources =
    resources === 'all' ? sql`true` : holdsAdmissionLock(sql`s.resource`, sql`locked`);
  const anyResource = resources === 'all' ? sql`true` : sql`exists (select 1 from locked)`;
  const held = admission.heldPriorities ?? [];
  const closed = admission.closedResources ?? [];
  const notHeld =
    held.length === 0
      ? sql`true`
      : sql`s.priority not in (${sql.join(
          held.map((priority) => sql`${priority}::smallint`),
          sql`, `,
        )})`;
  const notClosed =
    closed.length === 0
      ? sql`true`
      : sql`s.resource not in (${sql.join(
          closed.map((resource) => sql`${resource}`),
          sql`, `,
        )})`;
  const throttled = admission.throttledPriorities ?? [];
  const reserve = Math.min(1, Math.max(0, admission.throttleReserve ?? DEFAULT_THROTTLE_RESERVE));
  // Slots a step must leave free: P1–P3 the urgent reserve; a throttled priority the throttle
  // reserve (rounded up, but always one slot for it); the larger of the two when both apply.
  const urgent = Math.min(0.5, Math.max(0, admission.urgentReserve ?? 0));
  const urgentSlots = sql`case when x.priority > 0 then ${urgentSlotsOf(sql`x.max_in_flight`, sql`x.resource`, admission, sql`x.urgent_in_flight`)} else 0 end`;
  const throttleSlots =
    throttled.length === 0
      ? sql`0`
      : sql`case when x.priority in (${sql.join(
          throttled.map((priority) => sql`${priority}::smallint`),
          sql`, `,
        )}) then least(ceil(x.max_in_flight * ${reserve}::numeric), x.max_in_flight - 1) else 0 end`;
  // Slots a step must leave free after it (0: it may take every slot of the room).
  const keptFree =
    throttled.length === 0 && urgent === 0 && !hasLowerPriorityCaps(admission)
      ? sql`0`
      : sql`greatest(${urgentSlots}, ${throttleSlots})`;
  const effective =
    admission.agingMs > 0
      ? sql`greatest(0, s.priority - floor(extract(epoch from now() - s.due_at) * 1000 / ${admission.agingMs}::numeric)::int)`
      : sql`s.priority::int`;
  return sql`
    -- Every (resource, tenant, priority) with ready steps, found by skipping through the ready
    -- index one group at a time: as many index probes as groups, however long the backlog (a
    -- plain DISTINCT read every ready step on every claim).
    with recursive locked as materialized (${heldAdmissionLocks()}),
    -- With each group its oldest due time, the index's next column: whether the group has a due
    -- step needs no probe of its own (an \`exists\` for it was planned as a hash semi-join over
    -- every ready step, a scan of the whole backlog on every claim).
    ready_groups as (
      (select s.resource, s.tenant_id, s.priority, s.due_at as first_due
       from task_steps s
       where s.status = 'ready' and ${anyResource}
       order by s.resource, s.tenant_id, s.priority, s.due_at
       limit 1)
      union all
      select next.resource, next.tenant_id, next.priority, next.due_at
      from ready_groups g
      cross join lateral (
        select s.resource, s.tenant_id, s.priority, s.due_at
        from task_steps s
        where s.status = 'ready'
          and (s.resource, s.tenant_id, s.priority) > (g.resource, g.tenant_id, g.priority)
        order by s.resource, s.tenant_id, s.priority, s.due_at
        limit 1
      ) next
    ),
    -- The groups with a due step: a group's first row in the index is its oldest.
    groups as (
      select s.resource, s.tenant_id, s.priority
      from ready_groups s
      where ${onlyResources} and ${notHeld} and ${notClosed} and s.first_due <= now()
    ),
    in_flight as (
      select s.resource, s.tenant_id, count(*)::int as n,
        count(*) filter (where s.priority = 0)::int as urgent_n
      from task_steps s
      where s.status in ('dispatched', 'running')
        and s.resource in (select resource from groups)
      group by s.resource, s.tenant_id
    ),
    limits as (
      select r.resource, ${resourceLimitOf(sql`r.resource`, admission)} as max_in_flight
      from (select distinct resource from groups) r
    ),
    room as (
      select l.resource, l.max_in_flight,
        l.max_in_flight
          - coalesce((select sum(f.n) from in_flight f where f.resource = l.resource), 0) as room,
        coalesce((select sum(f.urgent_n) from in_flight f where f.resource = l.resource), 0)
          as urgent_in_flight
      from limits l
    ),
    -- Only the oldest \`room\` steps of each (resource, tenant, priority) can be admitted: within one
    -- priority, older means at least as urgent after aging. So the claim reads at most that many
    -- per group from the index instead of the whole backlog.
    ready as (
      select c.id, c.resource, c.tenant_id, c.priority, c.due_at, c.effective
      from groups g
      join room on room.resource = g.resource and room.room > 0
      cross join lateral (
        select s.id, s.resource, s.tenant_id, s.priority, s.due_at, ${effective} as effective
        from task_steps s
        join tasks t on t.id = s.task_id
        where s.resource = g.resource
          and s.tenant_id = g.tenant_id
          and s.priority = g.priority
          and s.status = 'ready'
          and s.due_at <= now()
          and t.status in ('queued', 'running')
          and not t.cancel_requested
          and not t.pause_requested
        order by s.due_at, s.id
        limit room.room
      ) c
    ),
    share as (
      select g.resource, g.tenant_id, coalesce(f.n, 0) as in_flight,
        case when own.tenant_id is not null then own.floor else coalesce(any_.floor, 0) end as floor,
        case when own.tenant_id is not null then own.cap else any_.cap end as cap
      from (select distinct resource, tenant_id from ready) g
      left join in_flight f on f.resource = g.resource and f.tenant_id = g.tenant_id
      left join tenant_limits own on own.tenant_id = g.tenant_id and own.resource = g.resource
      left join tenant_limits any_ on any_.tenant_id = g.tenant_id and any_.resource = ${ANY_RESOURCE}
    ),
    -- Aging lifts a whole priority class of a resource (to the level of its oldest ready step), not
    -- single steps: within a class, tenants keep sharing by floor and share however old their
    -- backlogs are, so a tenant's older flood cannot outrank another tenant's newer work. Steps of
    -- a tenant at its cap do not count: they waited for their tenant's slots, not for more urgent
    -- work, and counted, a capped tenant's backlog lifted the class over more urgent priorities
    -- for every other tenant.
    classed as (
      select r.*, coalesce(
          min(r.effective) filter (where sh.cap is null or sh.in_flight < sh.cap)
            over (partition by r.resource, r.priority),
          r.effective) as class_effective
      from ready r
      join share sh on sh.resource = r.resource and sh.tenant_id = r.tenant_id
    ),
    positioned as (
      select c.id, c.resource, c.priority, c.due_at, c.class_effective as effective,
        sh.floor, sh.cap,
        sh.in_flight + row_number() over (
          partition by c.resource, c.tenant_id order by c.class_effective, c.due_at, c.id
        ) as position
      from classed c
      join share sh on sh.resource = c.resource and sh.tenant_id = c.tenant_id
    ),
    ordered as (
      select p.*, row_number() over (
          partition by p.resource
          order by p.effective, (p.position <= p.floor) desc, p.position - p.floor, p.due_at, p.id
        ) as resource_rank
      from positioned p
      where p.cap is null or p.position <= p.cap
    ),
    reserved as (
      select x.*, ${keptFree} as kept_free
      from (
        select o.*, room.room, room.max_in_flight, room.urgent_in_flight
        from ordered o
        join room on room.resource = o.resource
      ) x
    ),
    -- The steps before each that a reserve keeps out: they take none of the room.
    passed as (
      select r.*, count(*) filter (
          where r.kept_free > 0 and r.resource_rank > r.room - r.kept_free
        ) over (partition by r.resource order by r.resource_rank) as passed_over
      from reserved r
    ),
    -- P1–P3, and a throttled priority, are admitted only below the resource's reserve: the rank
    -- counts every more urgent step before it, so the reserve stays free for them. A step that may
    -- take the reserve (P0; a priority not throttled) counts only the steps before it that are not
    -- kept out: aged steps of a reserve's priorities before it (aging lifts them to its level, and
    -- the older go first) would otherwise leave the reserve empty and it waiting behind them.
    chosen as (
      select x.id
      from passed x
      where case when x.kept_free > 0 then x.resource_rank <= x.room - x.kept_free
                 else x.resource_rank - x.passed_over <= x.room end
      order by x.effective, (x.position <= x.floor) desc, x.position - x.floor, x.due_at, x.id
      limit ${limit}
    ),
    claimable as (
      select s.id
      from task_steps s
      where s.id in (select id from chosen) and s.status = 'ready'
      for update skip locked
    ),
    claimed as (
      update task_steps s
      set status = 'dispatched', dispatch_count = s.dispatch_count + 1, dispatched_at = now()
      from claimable
      where s.id = claimable.id
      returning s.id, s.task_id, s.seq, s.name, s.resource, s.tenant_id, s.priority,
        s.dispatch_count, (select trace_parent from tasks t where t.id = s.task_id) as trace_parent
    ),
    -- Whether a due ready step of an admissible group stays behind (the room, a tenant's cap, a
    -- reserve or the batch kept it back): one probe of the group index per group, past the steps
    -- just claimed (this statement's snapshot still sees them ready).
    left_behind as (
      select exists (
        select 1 from groups g
        cross join lateral (
          select 1 from task_steps s
          where s.status = 'ready' and s.resource = g.resource and s.tenant_id = g.tenant_id
            and s.priority = g.priority and s.due_at <= now()
            and s.id <> all(array(select id from claimed))
          -- In the group index's order (the due-time index alone lacks \`id\`): without it a group
          -- with nothing left, the usual case for P0, was read as a scan of every ready step.
          order by s.due_at, s.id
          limit 1
        ) waiting
      ) as left_behind
    )
    -- One row even when nothing was claimed (its step columns null), to carry \`left_behind\`.
    select c.*, w.left_behind
    from left_behind w
    left join claimed c on true
  `;
}

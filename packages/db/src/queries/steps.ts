/**
 * The step rows: the ready queue (claimed by the scheduler), the executor's start/heartbeat/outcome
 * writes, and the scheduler's reading of recorded outcomes.
 */
import { and, eq, inArray, sql, type SQL } from 'drizzle-orm';
import type { Json, Priority, StepOutcome } from '@sluice/core';
import type { Executor, Transaction } from '../client.js';
import type { KeptConnection } from '../kept-connection.js';
import { rowsOf } from '../one-write.js';
import { recordOf, prefixedColumns } from '../raw-rows.js';
import { taskSteps, tasks } from '../schema.js';
import { idList, literalLimit } from './batch-input.js';
import { genericPlansForTransaction } from './plan-cache.js';
import type { TaskRecord } from './tasks.js';
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

/** A step row as stored. */
export type StepRecord = typeof taskSteps.$inferSelect;

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
  const outsideReserves =
    throttled.length === 0 && urgent === 0 && !hasLowerPriorityCaps(admission)
      ? sql`true`
      : sql`x.resource_rank <= x.room - greatest(${urgentSlots}, ${throttleSlots})`;
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
    -- backlogs are, so a tenant's older flood cannot outrank another tenant's newer work.
    classed as (
      select r.*, min(r.effective) over (partition by r.resource, r.priority) as class_effective
      from ready r
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
    admitted as (
      select o.*, room.room, room.max_in_flight, room.urgent_in_flight
      from ordered o
      join room on room.resource = o.resource
      where o.resource_rank <= room.room
    ),
    -- P1–P3, and a throttled priority, are admitted only below the resource's reserve: the rank
    -- counts every more urgent step before it, so the reserve stays free for them.
    chosen as (
      select x.id
      from admitted x
      where ${outsideReserves}
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

/** A dispatch of a step that JetStream stored, under its stream sequence. */
export interface PublishedDispatch {
  readonly stepId: number;
  /** The step's `dispatch_count` when it was claimed: a later dispatch is not this one. */
  readonly dispatch: number;
  readonly publishSeq: number;
}

/**
 * Stores the JetStream sequence of each published dispatch (for the reconciler), where no start
 * stored it first (a start records the sequence of the message it came in; see
 * {@link StepDispatchRef.publishSeq}).
 *
 * A step row locked by someone else is skipped, not waited for: it is being started (the start
 * stores the sequence itself), finished, or put back. Waiting was a deadlock: an executor's group
 * start takes several step rows, this statement many, in orders of their own, and Postgres broke
 * the cycle only after `deadlock_timeout` (1 s), which showed as a one-second tail in the wait of
 * high-priority steps under a backlog.
 */
export async function recordPublishSeqs(
  executor: Executor,
  published: readonly PublishedDispatch[],
): Promise<void> {
  if (published.length === 0) return;
  await executor.execute(publishSeqsStatement(published));
}

/** The statement of {@link recordPublishSeqs}, for a non-empty `published`. */
export function publishSeqsStatement(published: readonly PublishedDispatch[]): SQL {
  const values = published.map((p) => ({
    id: p.stepId,
    dispatch: p.dispatch,
    publish_seq: p.publishSeq,
  }));
  // The steps are found by their ids as a parameter list (`idList`). Joined to the values alone,
  // they were read by a sequential scan of the whole table, finished steps included, and a hash
  // join: the planner's choice for a batch of 150 in a table of 6,000 rows (it costs 150 key
  // lookups as random reads), seen in drains too, and a cost that grows with the history.
  return sql`
    with v as (
      select * from jsonb_to_recordset(${JSON.stringify(values)}::jsonb)
        as v(id bigint, dispatch int, publish_seq bigint)
    ),
    waiting as (
      select s.id, v.publish_seq
      from task_steps s join v on s.id = v.id and s.dispatch_count = v.dispatch
      where s.id in ${idList(published.map((p) => p.stepId))} and s.publish_seq is null
      order by s.id
      for update of s skip locked
    )
    update task_steps s set publish_seq = waiting.publish_seq
    from waiting
    where s.id = waiting.id
  `;
}

/** Puts claimed steps whose publication failed back into the ready queue. */
export async function releaseClaims(
  executor: Executor,
  claims: ReadonlyArray<{ stepId: number; dispatch: number }>,
): Promise<void> {
  for (const claim of claims) {
    await executor
      .update(taskSteps)
      .set({ status: 'ready' })
      .where(
        and(
          eq(taskSteps.id, claim.stepId),
          eq(taskSteps.dispatchCount, claim.dispatch),
          eq(taskSteps.status, 'dispatched'),
        ),
      );
  }
}

/** Identifies one dispatch of one step (what a step message names). */
export interface StepDispatchRef {
  readonly taskId: string;
  readonly seq: number;
  readonly dispatch: number;
  /**
   * The steps-stream sequence of the message that delivered this dispatch, when one is at hand: a
   * start records it (`publish_seq`), so the reconciler can find the message of a running step
   * whether or not the dispatcher's own record of it was written yet (see `recordPublishSeqs`).
   */
  readonly publishSeq?: number;
}

/** A stream sequence Postgres can store (`bigint`; JavaScript numbers are exact to 2^53). */
export function isStreamSequence(value: number | undefined): value is number {
  return value !== undefined && Number.isSafeInteger(value) && value > 0;
}

/** The condition "this row is the step `ref` names, under the same dispatch". */
function isDispatch(ref: StepDispatchRef) {
  return and(
    eq(taskSteps.taskId, ref.taskId),
    eq(taskSteps.seq, ref.seq),
    eq(taskSteps.dispatchCount, ref.dispatch),
  );
}

/**
 * Puts a dispatched step back into the ready queue without starting it (its task is being
 * paused). Returns false when the dispatch is stale.
 */
export async function releaseStep(executor: Executor, ref: StepDispatchRef): Promise<boolean> {
  const rows = await executor
    .update(taskSteps)
    .set({ status: 'ready' })
    .where(and(isDispatch(ref), eq(taskSteps.status, 'dispatched')))
    .returning({ id: taskSteps.id });
  return rows.length > 0;
}

/** Reads a step by task and sequence. */
export async function findStep(
  executor: Executor,
  taskId: string,
  seq: number,
): Promise<StepRecord | undefined> {
  const rows = await executor
    .select()
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.seq, seq)));
  return rows[0];
}

/**
 * Marks a dispatched step running on an executor (attempt + 1, heartbeat now). Returns the row, or
 * `undefined` when this dispatch may not start: the step has finished or was dispatched again
 * since, or it is running elsewhere with a heartbeat younger than `staleAfterMs`. A running step
 * whose heartbeat is older is taken over: its executor stopped (JetStream redelivered the message).
 */
export async function startStep(
  executor: Executor,
  ref: StepDispatchRef,
  staleAfterMs: number,
): Promise<StepRecord | undefined> {
  const rows = await executor
    .update(taskSteps)
    .set({
      status: 'running',
      attempts: sql`${taskSteps.attempts} + 1`,
      startedAt: sql`now()`,
      heartbeatAt: sql`now()`,
      ...(isStreamSequence(ref.publishSeq) ? { publishSeq: ref.publishSeq } : {}),
    })
    .where(
      and(
        isDispatch(ref),
        sql`(${taskSteps.status} = 'dispatched' or (${taskSteps.status} = 'running' and ${taskSteps.heartbeatAt} < now() - make_interval(secs => ${staleAfterMs / 1_000})))`,
      ),
    )
    .returning();
  return rows[0];
}

/** Records that running steps are alive (coarse: every few seconds, for the reconciler). */
export async function heartbeatSteps(
  executor: Executor,
  refs: readonly StepDispatchRef[],
): Promise<void> {
  for (const ref of refs) {
    await executor
      .update(taskSteps)
      .set({ heartbeatAt: sql`now()` })
      .where(and(isDispatch(ref), eq(taskSteps.status, 'running')));
  }
}

/** A recorded outcome the scheduler has not yet turned into a transition. */
export interface UnappliedOutcome {
  readonly stepId: number;
  readonly taskId: string;
  readonly seq: number;
  readonly name: string;
  /** The resource the step ran on (what the retry budget counts by). */
  readonly resource: string;
  readonly outcome: StepOutcome;
  /** Attempts of the step so far, the one that produced this outcome included. */
  readonly attempts: number;
  /** Set for a branch of a fan-out: the sequence of the step that fanned out, and its place. */
  readonly fanOutOf: number | null;
  readonly branchIndex: number | null;
}

/**
 * The condition "this step's recorded outcome is not applied yet": the predicate of the partial
 * index `task_steps_unapplied_idx`, which serves it.
 */
const UNAPPLIED_OUTCOME = sql.raw('outcome is not null and outcome_applied_at is null');

/** Outcomes locked for applying, with their tasks. */
export interface LockedOutcomes {
  /** In step id order. */
  readonly outcomes: UnappliedOutcome[];
  /** The task of every outcome, locked, by id. */
  readonly tasks: Map<string, TaskRecord>;
}

/** The task columns of {@link lockUnappliedOutcomes}' rows, each named `task.<column>`. */
const LOCKED_TASK_COLUMNS = prefixedColumns(tasks, 'task');

/**
 * Locks up to `limit` recorded outcomes that are not yet applied (skipping rows another scheduler
 * holds), then their tasks, in id order (the order of the executors' outcome writes too, so the
 * two never wait for each other in a circle): one statement, one round trip. Call inside the
 * transaction that applies them and marks them with {@link markOutcomesApplied}.
 */
export async function lockUnappliedOutcomes(
  tx: Transaction,
  limit: number,
): Promise<LockedOutcomes> {
  // Written out rather than built: the outcome pass runs this for every few steps that finish, and
  // the query builder's CPU per statement is a visible share of the scheduler's.
  const rows = await tx.execute<Record<string, unknown>>(sql`
    with outcome as materialized (
      select id, task_id, seq, name, resource, outcome, attempts, fan_out_of, branch_index
      from task_steps
      where ${UNAPPLIED_OUTCOME}
      order by id
      limit ${literalLimit(limit)}
      for update skip locked
    ), task as materialized (
      select * from tasks
      where id = any(array(select task_id from outcome))
      order by id
      for update
    )
    select outcome.*, ${LOCKED_TASK_COLUMNS}
    from outcome left join task on task.id = outcome.task_id
    order by outcome.id`);
  const locked: LockedOutcomes = { outcomes: [], tasks: new Map() };
  for (const row of rows) {
    const outcome = taskSteps.outcome.mapFromDriverValue(row.outcome) as StepOutcome | null;
    if (!outcome) continue;
    const stepId = Number(row.id);
    const taskId = row.task_id as string;
    if (row['task.id'] === null)
      throw new Error(`outcome of step ${stepId} names unknown task ${taskId}`);
    if (!locked.tasks.has(taskId)) locked.tasks.set(taskId, recordOf(tasks, row, 'task.'));
    locked.outcomes.push({
      stepId,
      taskId,
      seq: row.seq as number,
      name: row.name as string,
      resource: row.resource as string,
      outcome,
      attempts: row.attempts as number,
      fanOutOf: row.fan_out_of as number | null,
      branchIndex: row.branch_index as number | null,
    });
  }
  return locked;
}

/** Marks outcomes as turned into transitions. */
export async function markOutcomesApplied(
  executor: Executor,
  stepIds: readonly number[],
): Promise<void> {
  if (stepIds.length === 0) return;
  await executor.execute(sql`
    update task_steps set outcome_applied_at = now() where id in ${idList(stepIds)}`);
}

/** A step to add to a task. */
export interface NewStep {
  readonly taskId: string;
  readonly name: string;
  readonly resource: string;
  readonly tenantId: string;
  readonly priority: Priority;
  readonly input: Json;
  readonly taskAttempt: number;
  /** For a branch of a fan-out: the sequence of the step that fanned out, and its place. */
  readonly fanOutOf?: number | null;
  readonly branchIndex?: number | null;
  /** For the join step of a fan-out: the sequence of the step that fanned out. */
  readonly joinOf?: number | null;
  /** For a step run again by a retry: the sequence its idempotency key keeps. */
  readonly keySeq?: number | null;
}

/**
 * Adds steps to a task, ready and due now, numbered after the task's last step in the given order.
 * Call with the task row locked (every writer of a task's steps does), so numbers do not collide.
 * Returns their sequence numbers.
 */
export async function insertSteps(
  executor: Executor,
  steps: readonly NewStep[],
): Promise<number[]> {
  const first = steps[0];
  if (!first) return [];
  const [last] = await executor
    .select({ seq: sql<number>`coalesce(max(${taskSteps.seq}), 0)::int` })
    .from(taskSteps)
    .where(eq(taskSteps.taskId, first.taskId));
  const base = last?.seq ?? 0;
  const rows = await executor
    .insert(taskSteps)
    .values(
      steps.map((step, index) => ({
        taskId: step.taskId,
        seq: base + index + 1,
        name: step.name,
        resource: step.resource,
        tenantId: step.tenantId,
        priority: step.priority,
        status: 'ready',
        input: step.input,
        taskAttempt: step.taskAttempt,
        fanOutOf: step.fanOutOf ?? null,
        branchIndex: step.branchIndex ?? null,
        joinOf: step.joinOf ?? null,
        keySeq: step.keySeq ?? null,
      })),
    )
    .returning({ seq: taskSteps.seq });
  return rows.map((row) => row.seq);
}

/**
 * Cancels the steps of a cancelled task that have not started: those in the ready queue and those
 * dispatched but not yet picked up (an executor that receives one finds it cancelled and drops the
 * message). Running steps are left to stop through their abort signal.
 */
export async function cancelWaitingSteps(executor: Executor, taskId: string): Promise<number> {
  const rows = await executor
    .update(taskSteps)
    .set({ status: 'cancelled', finishedAt: sql`now()`, outcomeAppliedAt: sql`now()` })
    .where(and(eq(taskSteps.taskId, taskId), inArray(taskSteps.status, ['ready', 'dispatched'])))
    .returning({ id: taskSteps.id });
  return rows.length;
}

/** Steps of a task that an executor holds or is about to (dispatched or running). */
export async function inFlightSteps(executor: Executor, taskId: string): Promise<StepRecord[]> {
  return executor
    .select()
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), inArray(taskSteps.status, ['dispatched', 'running'])));
}

/**
 * On a manual retry: runs the task's failed and cancelled steps again, as new ready step rows of
 * the new attempt (the old rows stay, marked superseded, for the record). Succeeded steps are kept
 * and never run again. Returns the names of the steps re-run. Call with the task row locked.
 */
export async function rerunUnfinishedSteps(
  executor: Executor,
  task: { id: string; tenantId: string; priority: number; attempt: number },
): Promise<string[]> {
  const unfinished = await executor
    .update(taskSteps)
    .set({ superseded: true })
    .where(
      and(
        eq(taskSteps.taskId, task.id),
        inArray(taskSteps.status, ['failed', 'cancelled']),
        eq(taskSteps.superseded, false),
      ),
    )
    .returning();
  unfinished.sort((a, b) => a.seq - b.seq);
  await insertSteps(
    executor,
    unfinished.map((step) => ({
      taskId: task.id,
      tenantId: task.tenantId,
      priority: task.priority as Priority,
      taskAttempt: task.attempt,
      name: step.name,
      resource: step.resource,
      input: step.input,
      fanOutOf: step.fanOutOf,
      branchIndex: step.branchIndex,
      joinOf: step.joinOf,
      keySeq: step.keySeq ?? step.seq,
    })),
  );
  return unfinished.map((step) => step.name);
}

/** A task whose requested cancel or pause, or re-asked approval, can now be settled. */
export interface TaskToSettle {
  readonly taskId: string;
}

/**
 * Locks up to `limit` tasks the scheduler must settle because nothing of theirs is in flight any
 * more: running tasks with a requested cancel or pause, running tasks whose only work left is a
 * fan-out branch waiting out its retry backoff, and queued tasks (after a retry) whose only
 * pending work is an approval to ask again. Skips tasks another replica holds.
 */
export async function lockTasksToSettle(
  executor: Executor,
  limit: number,
): Promise<TaskToSettle[]> {
  const rows = await executor.execute<{ id: string }>(sql`
    ${tasksToSettle(limit)}
    for update of t skip locked
  `);
  return rows.map((row) => ({ taskId: row.id }));
}

/**
 * Whether any task waits to be settled ({@link lockTasksToSettle}), without a transaction: most
 * passes find none, and answering that in one statement saves them a `begin` and a `commit`.
 *
 * `appliedNow`: steps whose outcomes the caller's transaction marks applied in the same round trip
 * (the outcome pass asks within its transaction): they count as applied whether or not the marks
 * ran before this statement.
 */
export async function hasTasksToSettle(
  executor: Executor,
  appliedNow: readonly number[] = [],
): Promise<boolean> {
  const [row] = await executor.execute<{ found: boolean }>(
    sql`select exists (${tasksToSettle(1, appliedNow)}) as found`,
  );
  return row?.found === true;
}

/** The tasks to settle, oldest change first (see {@link lockTasksToSettle}). */
function tasksToSettle(limit: number, appliedNow: readonly number[] = []): SQL {
  // One statement text whatever the ids and limit, so each connection plans it a few times rather
  // than at nearly every outcome pass (~1.4 ms a plan; issue 7, pg_stat_statements). The ids only
  // filter steps already found through the task, so an array (whatever its estimate) plans alike.
  const notAppliedNow =
    appliedNow.length === 0
      ? sql``
      : sql` and s.id <> all(array(select jsonb_array_elements_text(${JSON.stringify(appliedNow)}::jsonb)::bigint))`;
  // The candidates come from three small partial indexes (migration 0008); the conditions below
  // then decide. Without them every pass read the whole tasks table — the backlog and the
  // finished history — once per batch of outcomes (issue 7 profile).
  return sql`
    select t.id from tasks t
    where t.id in (
        select c.id from tasks c
        where c.status = 'running' and (c.cancel_requested or c.pause_requested)
        union all
        select c.id from tasks c where c.status = 'queued' and c.approval is not null
        union all
        select w.task_id from task_steps w where w.status = 'ready' and w.due_at > now()
      )
      and (
        (t.status = 'running' and (t.cancel_requested or t.pause_requested))
        or (t.status = 'queued' and t.approval is not null
            and not exists (select 1 from task_steps r where r.task_id = t.id and r.status = 'ready'))
        or (t.status = 'running'
            and exists (select 1 from task_steps w
                        where w.task_id = t.id and w.status = 'ready' and w.due_at > now())
            and not exists (select 1 from task_steps r
                            where r.task_id = t.id and r.status = 'ready' and r.due_at <= now()))
      )
      and not exists (
        select 1 from task_steps s
        where s.task_id = t.id
          and (s.status in ('dispatched', 'running')
               or (s.outcome is not null and s.outcome_applied_at is null${notAppliedNow}))
      )
    order by t.updated_at
    limit ${literalLimit(limit)}`;
}

/**
 * Schedules a failed step to run again: back into the ready queue, due at `dueAt` (the due time is
 * the durable timer: no executor holds the step meanwhile). The same row keeps its sequence — so its
 * idempotency key — and its attempt count; the next dispatch gets a new number. The failure stays
 * in the task's events and error.
 */
export async function scheduleStepRetry(
  executor: Executor,
  stepId: number,
  dueAt: Date,
): Promise<void> {
  await executor
    .update(taskSteps)
    .set({ status: 'ready', dueAt, outcome: null, finishedAt: null })
    .where(and(eq(taskSteps.id, stepId), eq(taskSteps.status, 'failed')));
}

/** Whether any step of the task other than `stepId` is in flight or ready to run now. */
export async function hasOtherActiveSteps(
  executor: Executor,
  taskId: string,
  stepId: number,
): Promise<boolean> {
  const rows = await executor.execute<{ active: boolean }>(sql`
    select exists (
      select 1 from task_steps
      where task_id = ${taskId} and id <> ${stepId}
        and (status in ('dispatched', 'running') or (status = 'ready' and due_at <= now()))
    ) as active
  `);
  return rows[0]?.active === true;
}

/** The retry a running task waits for when nothing else of it is left to run. */
export interface WaitingRetry {
  readonly step: string;
  readonly dueAt: Date;
  /** The failure the retry answers, from the step's latest `step_retry_scheduled` fact. */
  readonly errorClass: string;
  readonly message: string;
}

/**
 * The step that is due next among the task's waiting retries, with the failure that made it wait;
 * undefined when none waits (or its failure was not recorded as a scheduled retry).
 */
export async function waitingRetry(
  executor: Executor,
  taskId: string,
): Promise<WaitingRetry | undefined> {
  const rows = await executor.execute<{
    name: string;
    due_at: Date | string;
    error_class: string | null;
    message: string | null;
  }>(sql`
    select s.name, s.due_at, e.data->>'error_class' as error_class, e.data->>'message' as message
    from task_steps s
    left join lateral (
      select data from task_events
      where task_id = s.task_id and type = 'step_retry_scheduled' and step = s.name
      order by seq desc limit 1
    ) e on true
    where s.task_id = ${taskId} and s.status = 'ready'
    order by s.due_at
    limit 1
  `);
  const row = rows[0];
  if (!row || row.error_class === null) return undefined;
  return {
    step: row.name,
    dueAt: new Date(row.due_at),
    errorClass: row.error_class,
    message: row.message ?? '',
  };
}

/** When the task's next waiting step is due (a retry after its backoff), if one waits. */
export async function nextAttemptAt(executor: Executor, taskId: string): Promise<Date | undefined> {
  const [row] = await executor
    .select({ dueAt: sql<Date | null>`min(${taskSteps.dueAt})` })
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.status, 'ready')));
  return row?.dueAt ? new Date(row.dueAt) : undefined;
}

/**
 * Admission limits (per resource class and per tenant share of a resource) and the cross-replica
 * lock that makes "count in-flight steps, then claim up to the limit" race-free.
 *
 * Why an advisory lock per resource and not a counter row: the in-flight count is read from the
 * step rows themselves (dispatched + running), so it cannot drift from the truth when executors,
 * the reconciler, cancellation or retention change a step's status — none of them has to know about
 * admission. Only a claim raises the count, and every claim of a resource holds that resource's
 * transaction-scoped lock from before it counts until it commits. See docs/decisions.md.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor, Transaction } from '../client.js';

/** First key of the two-key advisory locks admission takes (one lock per resource). */
export const ADMISSION_LOCK_NAMESPACE = 0x51c3_0005;

/** The second key of a resource's admission lock (the first is {@link ADMISSION_LOCK_NAMESPACE}). */
export function admissionLockKeyOf(resource: SQL): SQL {
  return sql`hashtext(${resource})`;
}

/**
 * The transaction-local setting in which a lock statement leaves the second keys of the admission
 * locks it took, comma-separated, for the claim after it in the same transaction.
 *
 * Why not `pg_locks`: reading it copies the whole lock table (every partition of the lock manager
 * and every backend's fast-path slots, under their locks, so its cost grows with
 * `max_connections`): 0.1–0.9 ms of each claim on the benchmark machine (auto_explain, issue 7
 * session 30), while the lock statement knows what it took. A statement that takes admission
 * locks records them here (`recordAdmissionKeys`); one that took none leaves the setting empty,
 * and a claim that runs without a lock statement before it finds nothing and claims nothing.
 */
const ADMISSION_KEYS_SETTING = 'sluice.admission_keys';

/**
 * Records, for the rest of the transaction, the admission locks a statement took, beside those
 * recorded before in it (advisory locks are held to the end of the transaction). An aggregate
 * over the statement's rows: `key`, a row's second key (`admissionLockKeyOf`), recorded where
 * `locked` holds.
 */
export function recordAdmissionKeys(key: SQL, locked: SQL): SQL {
  return sql`set_config(${ADMISSION_KEYS_SETTING},
    concat_ws(',', nullif(current_setting(${ADMISSION_KEYS_SETTING}, true), ''),
              string_agg(${key}::text, ',') filter (where ${locked})), true)`;
}

/**
 * Whether this transaction holds the admission lock of the resource named by the SQL expression
 * `resource`, read from `heldKeys`: a relation of the `key`s of {@link heldAdmissionLocks}.
 */
export function holdsAdmissionLock(resource: SQL, heldKeys: SQL): SQL {
  return sql`${admissionLockKeyOf(resource)} in (select key from ${heldKeys})`;
}

/**
 * The admission locks this transaction holds now (taken by {@link lockAdmission} or the urgent
 * claim's try), one row each: the second keys their statement recorded.
 */
export function heldAdmissionLocks(): SQL {
  return sql`select unnest(string_to_array(
      nullif(current_setting(${ADMISSION_KEYS_SETTING}, true), ''), ','))::int as key`;
}

/** Resource limit of a resource without a `resource_limits` row, unless the caller says otherwise. */
export const DEFAULT_RESOURCE_LIMIT = 64;

/** `tenant_limits.resource` of a tenant's share of every resource without a row of its own. */
export const ANY_RESOURCE = '*';

/** The limits a claim admits within (a subset of the admission settings). */
export interface ResourceLimits {
  /** The limit of a resource without a `resource_limits` row. */
  readonly defaultResourceLimit: number;
  /** The governor's lower limits, by resource. */
  readonly resourceLimits?: Readonly<Record<string, number>>;
  /** The urgent reserve: share of each limit only P0 may take (see `AdmissionSettings`). */
  readonly urgentReserve?: number;
  /**
   * The urgent-wait guard's caps (see `AdmissionSettings.lowerPriorityCaps`): P1–P3 steps in
   * flight, by resource, at which no more P1–P3 step is admitted.
   */
  readonly lowerPriorityCaps?: Readonly<Record<string, number>>;
}

/**
 * The slots of the urgent reserve of the resource named by the SQL expression `resource`, whose
 * limit is `maxInFlight`: its share of the limit, at most half, rounded down (the executors'
 * `urgentReserveSlots` rounds the same way; keep the two in step) — or, where the urgent-wait
 * guard caps the resource's lower priorities, everything above the cap and the P0 steps in flight
 * there (`urgentInFlight`, counted by the statement), when that is more: so the cap counts P1–P3
 * steps alone. (It once came with the P0 steps in flight at the guard's last reading added, and
 * every P0 step that finished between two readings let one more lower step in.)
 */
export function urgentSlotsOf(
  maxInFlight: SQL,
  resource: SQL,
  limits: ResourceLimits,
  urgentInFlight: SQL,
): SQL {
  const share = Math.min(0.5, Math.max(0, limits.urgentReserve ?? 0));
  const shareSlots = sql`floor(${maxInFlight} * ${share}::numeric)`;
  if (!hasLowerPriorityCaps(limits)) return shareSlots;
  const caps = JSON.stringify(limits.lowerPriorityCaps);
  return sql`greatest(${shareSlots}, ${maxInFlight}
    - coalesce((${caps}::jsonb ->> ${resource})::int + ${urgentInFlight}, ${maxInFlight}))`;
}

/** Whether the urgent-wait guard caps any resource's lower priorities now. */
export function hasLowerPriorityCaps(limits: ResourceLimits): boolean {
  return Object.keys(limits.lowerPriorityCaps ?? {}).length > 0;
}

/**
 * The in-flight limit of the resource named by the SQL expression `resource`: its
 * `resource_limits` row (else the default), lowered by the governor's limit when it set one.
 */
export function resourceLimitOf(resource: SQL, limits: ResourceLimits): SQL {
  const governed = JSON.stringify(limits.resourceLimits ?? {});
  return sql`least(
    coalesce(
      (select l.max_in_flight from resource_limits l where l.resource = ${resource}),
      ${limits.defaultResourceLimit}::int),
    coalesce((${governed}::jsonb ->> ${resource})::int, 2147483647))`;
}

/** What {@link lockAdmission} found: the resources with due ready steps, by whether they have room. */
export interface AdmissionLock {
  /** Resources with room under their limit, now locked for this transaction: claim in these. */
  readonly open: readonly string[];
  /**
   * Resources whose due ready steps must wait for a slot (not locked). Until a step of theirs
   * finishes or their limit changes, a new ready step there is not admitted either: the
   * dispatcher need not look again for it.
   */
  readonly full: readonly string[];
}

/**
 * Locks, for the rest of the transaction, the admission of every resource that has due ready steps
 * and room under its limit now ({@link AdmissionLock.open}), and names those without room
 * ({@link AdmissionLock.full}). Locks are taken in one fixed order (by key, then name) so two
 * claimers never wait on each other in a cycle. Must run inside a transaction, before the count:
 * under READ COMMITTED the next statement's snapshot then sees every claim committed before it.
 *
 * The room seen here is a first look, from before the locks (this statement's snapshot), that
 * spares the claim when every resource with work is full — the usual state of a backlog, where each
 * created task would otherwise cost a claim that admits nothing. "Full" counts the urgent reserve
 * (widened by the urgent-wait guard's cap) unless a P0 step is ready; tenant caps and throttles
 * are left to the claim, which counts again under the locks. A resource wrongly seen full had a
 * step finish just now, and the wake-up of that step's result brings the dispatcher back.
 */
export async function lockAdmission(
  tx: Transaction,
  limits: ResourceLimits,
): Promise<AdmissionLock> {
  return admissionLockOf(await tx.execute<AdmissionLockRow>(lockAdmissionStatement(limits)));
}

/** A row of {@link lockAdmissionStatement}: a resource with due ready steps, locked or full. */
export interface AdmissionLockRow extends Record<string, unknown> {
  readonly resource: string;
  readonly locked: string | null;
}

/** The statement of {@link lockAdmission}, for a caller that sends it itself. */
export function lockAdmissionStatement(limits: ResourceLimits): SQL {
  // The distinct resources are found by skipping through the ready index one resource at a time
  // (a recursive "loose index scan"), not by reading every ready step: with a backlog of 20,000
  // steps the plain DISTINCT made each claim read all of them, and claims take turns under these
  // locks, which capped dispatch at about 100 steps a second (issue 7 profile).
  return sql`
    with recursive ready_resources as (
      (select resource from task_steps where status = 'ready' order by resource limit 1)
      union all
      select next.resource
      from ready_resources r
      cross join lateral (
        select s.resource from task_steps s
        where s.status = 'ready' and s.resource > r.resource
        order by s.resource
        limit 1
      ) next
    ), locks as materialized (
      select r.resource, r.key,
             case when r.has_room
                  then pg_advisory_xact_lock(${ADMISSION_LOCK_NAMESPACE}::int, r.key)::text
             end as locked
      from (
        select resource, ${admissionLockKeyOf(sql`resource`)} as key,
               (select count(*) from task_steps f
                where f.status in ('dispatched', 'running') and f.resource = d.resource)
                 < l.max_in_flight - case
                     when exists (
                       select 1 from task_steps p
                       where p.status = 'ready' and p.resource = d.resource and p.priority = 0
                         and p.due_at <= now())
                     then 0
                     else ${urgentSlotsOf(
                       sql`l.max_in_flight`,
                       sql`d.resource`,
                       limits,
                       sql`(select count(*) from task_steps u
                            where u.status in ('dispatched', 'running') and u.resource = d.resource
                              and u.priority = 0)`,
                     )}
                   end as has_room
        from ready_resources d
        cross join lateral (select ${resourceLimitOf(sql`d.resource`, limits)} as max_in_flight) l
        where exists (
          select 1 from task_steps s
          where s.status = 'ready' and s.resource = d.resource and s.due_at <= now()
        )
        order by key, resource
      ) r
    ), noted as (
      -- What the claim after this statement reads (heldAdmissionLocks); one row, also when no
      -- resource has work.
      select ${recordAdmissionKeys(sql`key`, sql`locked is not null`)}
      from locks
    )
    select l.resource, l.locked from noted cross join locks l
  `;
}

/** What the rows of {@link lockAdmissionStatement} say. */
export function admissionLockOf(rows: readonly AdmissionLockRow[]): AdmissionLock {
  return {
    open: rows.filter((row) => row.locked !== null).map((row) => row.resource),
    full: rows.filter((row) => row.locked === null).map((row) => row.resource),
  };
}

/** Sets (or replaces) the in-flight limit of a resource class. */
export async function setResourceLimit(
  executor: Executor,
  resource: string,
  maxInFlight: number,
): Promise<void> {
  await executor.execute(sql`
    insert into resource_limits (resource, max_in_flight) values (${resource}, ${maxInFlight})
    on conflict (resource) do update set max_in_flight = excluded.max_in_flight, updated_at = now()
  `);
}

/** Removes a resource's limit (the default applies again); returns whether there was one. */
export async function clearResourceLimit(executor: Executor, resource: string): Promise<boolean> {
  const rows = await executor.execute(
    sql`delete from resource_limits where resource = ${resource} returning resource`,
  );
  return rows.length > 0;
}

/** A tenant's share of a resource (or of every resource: {@link ANY_RESOURCE}). */
export interface TenantLimit {
  readonly tenantId: string;
  readonly resource: string;
  /** In-flight steps admitted before any tenant at or over its own floor. */
  readonly floor: number;
  /** Most in-flight steps ever; `null`: only the resource limit. */
  readonly cap: number | null;
}

/** Sets (or replaces) a tenant's floor and cap on a resource. */
export async function setTenantLimit(executor: Executor, limit: TenantLimit): Promise<void> {
  await executor.execute(sql`
    insert into tenant_limits (tenant_id, resource, floor, cap)
    values (${limit.tenantId}, ${limit.resource}, ${limit.floor}, ${limit.cap})
    on conflict (tenant_id, resource)
    do update set floor = excluded.floor, cap = excluded.cap, updated_at = now()
  `);
}

/** Removes a tenant's share of a resource; returns whether there was one. */
export async function clearTenantLimit(
  executor: Executor,
  tenantId: string,
  resource: string,
): Promise<boolean> {
  const rows = await executor.execute(sql`
    delete from tenant_limits where tenant_id = ${tenantId} and resource = ${resource}
    returning tenant_id
  `);
  return rows.length > 0;
}

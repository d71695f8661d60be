/**
 * Retention: deleting finished tasks (with their steps, events, timers and settled dead letters)
 * once they are old enough, leaving an idempotency tombstone for each deleted task's key, and
 * deleting tombstones once their window has passed.
 *
 * Both work in small batches, each one short transaction that locks only the rows it deletes and
 * skips any row someone else holds (`FOR UPDATE SKIP LOCKED`): the hot path (claims, transitions,
 * outcomes) never waits on retention, and several deleters never delete the same task twice.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { recordOf } from '../raw-rows.js';
import { idempotencyTombstones } from '../schema.js';
import { textArrayOf } from './batch-input.js';

/** A tombstone as stored. */
export type IdempotencyTombstone = typeof idempotencyTombstones.$inferSelect;

/** The statuses retention may delete: final ones (a later RetryTask is no longer offered). */
export const RETAINED_FINAL_STATUSES = ['succeeded', 'failed_terminal', 'cancelled'] as const;

/** One batch of {@link deleteFinishedTasks}. */
export interface DeleteFinishedTasksOptions {
  /** Tasks that finished before this time are deleted. */
  readonly finishedBefore: Date;
  /** How long the tombstone of a deleted task's idempotency key lives, in milliseconds. */
  readonly tombstoneTtlMs: number;
  /** The most tasks deleted in this batch. */
  readonly limit: number;
}

/** What one batch deleted, by table. */
export interface DeletedTasks {
  readonly tasks: number;
  readonly steps: number;
  readonly events: number;
  readonly timers: number;
  /** Dead letters already redriven (a letter still waiting for a decision keeps its task). */
  readonly deadLetters: number;
  /** Tombstones written for the deleted tasks' idempotency keys. */
  readonly tombstones: number;
}

/**
 * Deletes up to `limit` tasks in a final state that finished before `finishedBefore`, oldest first,
 * with everything that references them, in one statement (so one transaction): a task is gone with
 * all its rows or not at all, and its idempotency key's tombstone is written in the same commit, so
 * a concurrent `CreateTask` with that key sees either the task or the tombstone, never neither.
 *
 * A task is kept while it has a dead letter not yet redriven (purging the letter releases it), and
 * while any of its events is not yet published to the events stream (the relay must see them).
 * Tasks locked by anyone else (a retry, a late outcome) are skipped and met again next batch.
 */
export async function deleteFinishedTasks(
  executor: Executor,
  options: DeleteFinishedTasksOptions,
): Promise<DeletedTasks> {
  const finalStatuses = sql.join(
    RETAINED_FINAL_STATUSES.map((status) => sql`${status}`),
    sql`, `,
  );
  // Foreign keys are checked at the end of the statement, after every sub-statement ran, so the
  // tasks may be deleted alongside the rows that reference them.
  const rows = await executor.execute<{
    tasks: number;
    steps: number;
    events: number;
    timers: number;
    dead_letters: number;
    tombstones: number;
  }>(sql`
    with doomed as (
      select t.id, t.tenant_id, t.idempotency_key, t.type, t.type_version, t.priority,
        t.input_hash, t.status, t.created_at, t.finished_at
      from tasks t
      where t.status in (${finalStatuses})
        and t.finished_at < ${options.finishedBefore.toISOString()}::timestamptz
        and not exists (
          select 1 from dead_letters d where d.task_id = t.id and d.redriven_at is null
        )
        -- Not while an event of the task waits for the relay: it would go unpublished.
        and not exists (
          select 1 from task_events e
          join task_event_outbox o on o.event_id = e.id
          where e.task_id = t.id
        )
      order by t.finished_at, t.id
      limit ${options.limit}
      for update of t skip locked
    ),
    deleted_events as (
      delete from task_events e using doomed where e.task_id = doomed.id returning 1
    ),
    deleted_steps as (
      delete from task_steps s using doomed where s.task_id = doomed.id returning 1
    ),
    deleted_timers as (
      delete from task_timers tm using doomed where tm.task_id = doomed.id returning 1
    ),
    deleted_letters as (
      delete from dead_letters d using doomed where d.task_id = doomed.id returning 1
    ),
    tombstones as (
      insert into idempotency_tombstones (tenant_id, idempotency_key, task_id, type, type_version,
        priority, input_hash, status, task_created_at, finished_at, expires_at)
      select tenant_id, idempotency_key, id, type, type_version, priority, input_hash, status,
        created_at, finished_at, now() + make_interval(secs => ${options.tombstoneTtlMs / 1_000})
      from doomed
      where idempotency_key is not null
      -- An expired tombstone of an earlier holder of the key may still be there: replace it.
      on conflict (tenant_id, idempotency_key) do update set
        task_id = excluded.task_id, type = excluded.type, type_version = excluded.type_version,
        priority = excluded.priority, input_hash = excluded.input_hash, status = excluded.status,
        task_created_at = excluded.task_created_at, finished_at = excluded.finished_at,
        created_at = now(), expires_at = excluded.expires_at
      returning 1
    ),
    deleted_tasks as (
      delete from tasks t using doomed where t.id = doomed.id returning 1
    )
    select
      (select count(*)::int from deleted_tasks) as tasks,
      (select count(*)::int from deleted_steps) as steps,
      (select count(*)::int from deleted_events) as events,
      (select count(*)::int from deleted_timers) as timers,
      (select count(*)::int from deleted_letters) as dead_letters,
      (select count(*)::int from tombstones) as tombstones
  `);
  const row = rows[0];
  if (!row) throw new Error('the retention statement returned no row');
  return {
    tasks: row.tasks,
    steps: row.steps,
    events: row.events,
    timers: row.timers,
    deadLetters: row.dead_letters,
    tombstones: row.tombstones,
  };
}

/** Deletes up to `limit` tombstones whose window has passed; returns how many. */
export async function deleteExpiredTombstones(executor: Executor, limit: number): Promise<number> {
  const rows = await executor.execute<{ deleted: number }>(sql`
    with expired as (
      select tenant_id, idempotency_key from idempotency_tombstones
      where expires_at <= now()
      order by expires_at
      limit ${limit}
      for update skip locked
    ),
    deleted as (
      delete from idempotency_tombstones t using expired
      where t.tenant_id = expired.tenant_id and t.idempotency_key = expired.idempotency_key
      returning 1
    )
    select count(*)::int as deleted from deleted
  `);
  return rows[0]?.deleted ?? 0;
}

/** The live (unexpired) tombstone of a tenant's idempotency key, if any. */
export async function findLiveTombstone(
  executor: Executor,
  tenantId: string,
  idempotencyKey: string,
): Promise<IdempotencyTombstone | undefined> {
  const [row] = await executor.execute(liveTombstonesStatement(tenantId, [idempotencyKey]));
  return row && recordOf(idempotencyTombstones, row);
}

/**
 * The live tombstones of a tenant's `keys`, raw: batch creation pipelines it behind its insert
 * (raw statements go out in the order they are called).
 */
export function liveTombstonesStatement(tenantId: string, keys: readonly string[]): SQL {
  return sql`
    select * from idempotency_tombstones
    where tenant_id = ${tenantId} and idempotency_key = any(${textArrayOf(keys)})
      and expires_at > now()`;
}

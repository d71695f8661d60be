/**
 * Task events that are not transitions (step progress and results), and the event relay's reads
 * and marks of the outbox (`task_event_outbox`). Every event takes the next per-task sequence by
 * incrementing `tasks.last_event_seq`, which also locks the task row until commit: events of one
 * task therefore commit in sequence order, so a relay reading committed rows in `id` order never
 * sees seq N+1 before seq N.
 */
import { sql, type SQL } from 'drizzle-orm';
import type postgres from 'postgres';
import type { Json } from '@sluice/core';
import type { Executor } from '../client.js';
import { recordOf } from '../raw-rows.js';
import { taskEvents, tasks } from '../schema.js';
import { idList } from './batch-input.js';
import type { TaskEventRecord } from './tasks.js';

/**
 * The Postgres notification channel raised when task events commit (trigger of migration 0001), so
 * the event relay publishes at once instead of at its next poll.
 */
export const TASK_EVENTS_CHANNEL = 'sluice_task_events';

/**
 * Calls `wake` on each notification of {@link TASK_EVENTS_CHANNEL} (what the event relay hears),
 * and each time the listen is made: the driver makes it again on a new connection when its
 * connection is lost (a Postgres restart, a failover), and the events committed before that
 * notified no one. Woken then, the relay publishes them at once rather than at its next poll.
 */
export function listenForTaskEvents(
  client: postgres.Sql,
  wake: () => void,
): Promise<postgres.ListenMeta> {
  return client.listen(
    TASK_EVENTS_CHANNEL,
    () => wake(),
    () => wake(),
  );
}

/** A fact about a task that does not change its state. */
export interface AppendedEvent {
  readonly taskId: string;
  readonly type: string;
  readonly step?: string | null;
  readonly data?: Record<string, Json>;
}

/** Appends a non-transition event with the task's next sequence; returns that sequence. */
export async function appendTaskEvent(executor: Executor, event: AppendedEvent): Promise<number> {
  // One statement (a data-modifying CTE) rather than the update and the insert apart: a round trip
  // less on every step start, result and progress report.
  const rows = await executor.execute<{ seq: number }>(sql`
    with bumped as (
      update ${tasks}
      set ${sql.identifier(tasks.lastEventSeq.name)} = ${tasks.lastEventSeq} + 1,
          ${sql.identifier(tasks.updatedAt.name)} = now()
      where ${tasks.id} = ${event.taskId}
      returning ${tasks.lastEventSeq} as seq, ${tasks.tenantId} as tenant_id
    ),
    appended as (
      insert into ${taskEvents} (task_id, tenant_id, seq, type, step, data)
      select ${event.taskId}::uuid, bumped.tenant_id, bumped.seq, ${event.type}::text,
             ${event.step ?? null}::text,
             ${event.data === undefined ? null : JSON.stringify(event.data)}::jsonb
      from bumped
      returning id, seq
    ),
    outboxed as (insert into task_event_outbox (event_id) select id from appended)
    select seq from appended`);
  const row = rows[0];
  if (!row) throw new Error(`cannot append an event to unknown task ${event.taskId}`);
  return Number(row.seq);
}

/**
 * The oldest events the relay has not published yet (those in the outbox), in commit-consistent
 * `id` order, but those in `leaveOut` (published by the relay, their marks not written yet). A
 * read only: it takes no transaction id and commits nothing.
 */
export async function unpublishedEvents(
  executor: Executor,
  limit: number,
  leaveOut: readonly number[] = [],
): Promise<TaskEventRecord[]> {
  const rows = await executor.execute<Record<string, unknown>>(
    unpublishedEventsStatement(limit, leaveOut),
  );
  return rows.map((row) => recordOf(taskEvents, row));
}

/** The statement of {@link unpublishedEvents} (exported for its plan's test). */
export function unpublishedEventsStatement(limit: number, leaveOut: readonly number[]): SQL {
  // Written out rather than built, like the other statements the relay runs per batch: the query
  // builder's CPU per statement is a visible share of the scheduler's.
  return sql`select e.* from ${outboxHead(limit, leaveOut)} order by o.event_id`;
}

/** What {@link markPublishedAndReadUnpublished} did: the ids it marked, and what it read. */
export interface MarkedAndRead {
  /**
   * The ids this statement took out of the outbox: those of `published` that no other statement
   * had marked already (another relay that published them too, across a change of lease holder).
   */
  readonly marked: number[];
  readonly events: TaskEventRecord[];
}

/**
 * Marks the events `published` (the relay's publications of its last batch: their ids leave the
 * outbox) and reads the oldest events still unpublished, in one statement: the relay's read and
 * its previous batch's mark in one round trip. The read cannot see the mark (one statement, one
 * snapshot), so it leaves those ids out itself.
 */
export async function markPublishedAndReadUnpublished(
  executor: Executor,
  published: readonly number[],
  limit: number,
): Promise<MarkedAndRead> {
  if (published.length === 0) {
    return { marked: [], events: await unpublishedEvents(executor, limit) };
  }
  // The marked ids ride on every row read, and on one row of nulls when none is read.
  const rows = await executor.execute<Record<string, unknown>>(sql`
    with marked as (
      delete from task_event_outbox where event_id in ${idList(published)} returning event_id
    ),
    marks as (select coalesce(array_agg(event_id), '{}') as marked_ids from marked)
    select h.*, marks.marked_ids from marks
    left join lateral (
      select e.* from ${outboxHead(limit, published)} order by o.event_id
    ) h on true
    order by h.id`);
  return {
    marked: idsOf(rows[0]?.marked_ids),
    events: rows.filter((row) => row.id !== null).map((row) => recordOf(taskEvents, row)),
  };
}

/**
 * Marks events as published: their ids leave the outbox. Answers the ids it took out (not those
 * another statement had marked already).
 */
export async function markEventsPublished(
  executor: Executor,
  ids: readonly number[],
): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await executor.execute<{ event_id: unknown }>(
    sql`delete from task_event_outbox where event_id in ${idList(ids)} returning event_id`,
  );
  return rows.map((row) => Number(row.event_id));
}

/** Event ids as the driver returns a `bigint[]` (strings). */
function idsOf(value: unknown): number[] {
  return Array.isArray(value) ? value.map(Number) : [];
}

/**
 * The first `limit` ids of the outbox (but `leaveOut`) as `o`, each with its event as `e`. The ids
 * are taken first and each event is then found by its key (the lateral subquery's `limit` keeps
 * Postgres from turning it into a join it might plan as a read of every event, should its
 * statistics misjudge the tables; decisions.md, "Statements are written so that misjudged
 * statistics cannot make them read a table").
 */
function outboxHead(limit: number, leaveOut: readonly number[]): SQL {
  const left = leaveOut.length === 0 ? sql`` : sql`where event_id not in ${idList(leaveOut)}`;
  return sql`
    (select event_id from task_event_outbox ${left} order by event_id limit ${limit}) o
    cross join lateral (select * from task_events where id = o.event_id limit 1) e`;
}

/**
 * Task events that are not transitions (step progress and results), and the event relay's outbox
 * reads. Every event takes the next per-task sequence by incrementing `tasks.last_event_seq`, which
 * also locks the task row until commit: events of one task therefore commit in sequence order, so
 * a relay reading committed rows in `id` order never sees seq N+1 before seq N.
 */
import { asc, eq, inArray, isNull, sql } from 'drizzle-orm';
import type { Json } from '@sluice/core';
import type { Executor } from '../client.js';
import { taskEvents, tasks } from '../schema.js';
import type { TaskEventRecord } from './tasks.js';

/**
 * The Postgres notification channel raised when task events commit (trigger of migration 0001), so
 * the event relay publishes at once instead of at its next poll.
 */
export const TASK_EVENTS_CHANNEL = 'sluice_task_events';

/** A fact about a task that does not change its state. */
export interface AppendedEvent {
  readonly taskId: string;
  readonly type: string;
  readonly step?: string | null;
  readonly data?: Record<string, Json>;
}

/** Appends a non-transition event with the task's next sequence; returns that sequence. */
export async function appendTaskEvent(executor: Executor, event: AppendedEvent): Promise<number> {
  const rows = await executor
    .update(tasks)
    .set({ lastEventSeq: sql`${tasks.lastEventSeq} + 1`, updatedAt: sql`now()` })
    .where(eq(tasks.id, event.taskId))
    .returning({ seq: tasks.lastEventSeq, tenantId: tasks.tenantId });
  const row = rows[0];
  if (!row) throw new Error(`cannot append an event to unknown task ${event.taskId}`);
  await executor.insert(taskEvents).values({
    taskId: event.taskId,
    tenantId: row.tenantId,
    seq: row.seq,
    type: event.type,
    step: event.step ?? null,
    data: event.data ?? null,
  });
  return row.seq;
}

/** The oldest events the relay has not published yet, in commit-consistent `id` order. */
export async function unpublishedEvents(
  executor: Executor,
  limit: number,
): Promise<TaskEventRecord[]> {
  return executor
    .select()
    .from(taskEvents)
    .where(isNull(taskEvents.publishedAt))
    .orderBy(asc(taskEvents.id))
    .limit(limit);
}

/** Marks events as published. */
export async function markEventsPublished(
  executor: Executor,
  ids: readonly number[],
): Promise<void> {
  if (ids.length === 0) return;
  await executor
    .update(taskEvents)
    .set({ publishedAt: sql`now()` })
    .where(inArray(taskEvents.id, [...ids]));
}

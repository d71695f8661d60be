/**
 * Durable timers (`task_timers`): rows with a due time, fired once by the service that owns their
 * kind. They survive restarts of every process and the loss of JetStream's store.
 */
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import type { Json } from '@sluice/core';
import type { Executor } from '../client.js';
import { taskTimers, type PendingApproval } from '../schema.js';

/** Kinds of timers. */
export const TimerKind = {
  /** A pending approval's deadline; fired by the scheduler. */
  ApprovalTimeout: 'approval_timeout',
  /** The end of a failed task's retry backoff; fired by the scheduler. */
  RetryBackoff: 'retry_backoff',
} as const;
export type TimerKind = (typeof TimerKind)[keyof typeof TimerKind];

/** A timer row as stored. */
export type TimerRecord = typeof taskTimers.$inferSelect;

/** Adds a timer. */
export async function addTimer(
  executor: Executor,
  timer: { taskId: string; kind: TimerKind; dueAt: Date; data?: Record<string, Json> },
): Promise<void> {
  await executor.insert(taskTimers).values({
    taskId: timer.taskId,
    kind: timer.kind,
    dueAt: timer.dueAt,
    data: timer.data ?? null,
  });
}

/**
 * Closes a task's open timers (of one kind, or all) without firing them: what they waited for
 * happened, or the task was cancelled.
 */
export async function closeTimers(
  executor: Executor,
  taskId: string,
  kind?: TimerKind,
): Promise<void> {
  await executor
    .update(taskTimers)
    .set({ doneAt: sql`now()` })
    .where(
      and(
        eq(taskTimers.taskId, taskId),
        kind === undefined ? undefined : eq(taskTimers.kind, kind),
        isNull(taskTimers.doneAt),
      ),
    );
}

/**
 * Locks up to `limit` due, open timers (skipping those another replica holds), oldest first. Fire
 * them and close them with {@link markTimersDone} in the same transaction, so each fires once.
 */
export async function lockDueTimers(executor: Executor, limit: number): Promise<TimerRecord[]> {
  return executor
    .select()
    .from(taskTimers)
    .where(and(isNull(taskTimers.doneAt), sql`${taskTimers.dueAt} <= now()`))
    .orderBy(asc(taskTimers.dueAt), asc(taskTimers.id))
    .limit(limit)
    .for('update', { skipLocked: true });
}

/** Marks timers fired. */
export async function markTimersDone(executor: Executor, ids: readonly number[]): Promise<void> {
  for (const id of ids) {
    await executor
      .update(taskTimers)
      .set({ doneAt: sql`now()` })
      .where(eq(taskTimers.id, id));
  }
}

/** When the next open timer is due, or `undefined` when none is open (for sleeping until then). */
export async function nextTimerDue(executor: Executor): Promise<Date | undefined> {
  const [row] = await executor
    .select({ dueAt: taskTimers.dueAt })
    .from(taskTimers)
    .where(isNull(taskTimers.doneAt))
    .orderBy(asc(taskTimers.dueAt))
    .limit(1);
  return row?.dueAt;
}

/** Adds the durable timer of a pending approval's deadline (fired by the scheduler). */
export async function armApprovalTimer(
  executor: Executor,
  taskId: string,
  approval: PendingApproval,
): Promise<void> {
  await addTimer(executor, {
    taskId,
    kind: TimerKind.ApprovalTimeout,
    dueAt: new Date(approval.deadline),
    data: { deadline: approval.deadline },
  });
}

/**
 * Dead letters: the record of work no retry reaches any more. The scheduler writes one in the
 * transaction that fails the task; `AdminService` lists, redrives (marks) and purges (deletes) them.
 */
import { and, asc, eq, gt, inArray, isNull, or, sql, type SQL } from 'drizzle-orm';
import type { SerializedStepError } from '@sluice/core';
import type { Executor, Transaction } from '../client.js';
import { deadLetters, type DeadLetterReason } from '../schema.js';

/** A stored dead letter. */
export interface DeadLetterRecord {
  readonly id: string;
  readonly taskId: string;
  readonly tenantId: string;
  readonly step: string;
  readonly stepSeq: number;
  readonly reason: DeadLetterReason;
  readonly error: SerializedStepError;
  readonly attempts: number;
  /** JetStream stream sequence of the step message (advisory path only). */
  readonly streamSeq: number | null;
  readonly createdAt: Date;
  readonly redrivenAt: Date | null;
}

/** What a new dead letter records. */
export interface NewDeadLetter {
  readonly taskId: string;
  readonly tenantId: string;
  readonly step: string;
  readonly stepSeq: number;
  readonly reason: DeadLetterReason;
  readonly error: SerializedStepError;
  readonly attempts: number;
  readonly streamSeq?: number;
}

/** Records a dead letter; returns its id. */
export async function insertDeadLetter(executor: Executor, letter: NewDeadLetter): Promise<string> {
  const [row] = await executor
    .insert(deadLetters)
    .values({
      taskId: letter.taskId,
      tenantId: letter.tenantId,
      step: letter.step,
      stepSeq: letter.stepSeq,
      reason: letter.reason,
      error: letter.error,
      attempts: letter.attempts,
      streamSeq: letter.streamSeq ?? null,
    })
    .returning({ id: deadLetters.id });
  if (!row) throw new Error(`dead letter of task ${letter.taskId} was not inserted`);
  return row.id;
}

/** Where a page of dead letters continues: after this letter in (created_at, id) order. */
export interface DeadLetterCursor {
  readonly createdAt: Date;
  readonly id: string;
}

/** A page query of {@link listDeadLetters}. */
export interface ListDeadLettersQuery {
  readonly limit: number;
  readonly after?: DeadLetterCursor;
  /** Only this tenant's letters; every tenant's when absent. */
  readonly tenantId?: string;
}

/** Dead letters oldest first (keyset pages on created_at, id), redriven ones included. */
export async function listDeadLetters(
  executor: Executor,
  query: ListDeadLettersQuery,
): Promise<DeadLetterRecord[]> {
  const conditions: SQL[] = [];
  if (query.tenantId !== undefined) conditions.push(eq(deadLetters.tenantId, query.tenantId));
  if (query.after) {
    const { createdAt, id } = query.after;
    const next = or(
      gt(deadLetters.createdAt, createdAt),
      and(eq(deadLetters.createdAt, createdAt), gt(deadLetters.id, id)),
    );
    if (next) conditions.push(next);
  }
  return executor
    .select()
    .from(deadLetters)
    .where(and(...conditions))
    .orderBy(asc(deadLetters.createdAt), asc(deadLetters.id))
    .limit(query.limit);
}

/** The dead letters of a task, oldest first. */
export async function deadLettersOfTask(
  executor: Executor,
  taskId: string,
): Promise<DeadLetterRecord[]> {
  return executor
    .select()
    .from(deadLetters)
    .where(eq(deadLetters.taskId, taskId))
    .orderBy(asc(deadLetters.createdAt), asc(deadLetters.id));
}

/** One dead letter, without a lock; `undefined` when there is none with this id. */
export async function findDeadLetter(
  executor: Executor,
  id: string,
): Promise<DeadLetterRecord | undefined> {
  const [row] = await executor.select().from(deadLetters).where(eq(deadLetters.id, id));
  return row;
}

/**
 * Locks one dead letter for a redrive; `undefined` when there is none with this id. Lock its task
 * first: a retry locks the task, then marks (locks) all its letters.
 */
export async function lockDeadLetter(
  tx: Transaction,
  id: string,
): Promise<DeadLetterRecord | undefined> {
  const [row] = await tx.select().from(deadLetters).where(eq(deadLetters.id, id)).for('update');
  return row;
}

/** Marks a letter redriven (once: a letter already redriven keeps its first time); true if it was. */
export async function markDeadLetterRedriven(tx: Transaction, id: string): Promise<boolean> {
  const rows = await tx
    .update(deadLetters)
    .set({ redrivenAt: sql`now()` })
    .where(and(eq(deadLetters.id, id), isNull(deadLetters.redrivenAt)))
    .returning({ id: deadLetters.id });
  return rows.length === 1;
}

/**
 * Marks every open letter of a task redriven, now: a retry of the task (by `RetryTask` or by a
 * redrive) answers all of them, so none outlives its cause next to a task that may succeed.
 * Returns the ids it marked.
 */
export async function markTaskDeadLettersRedriven(
  tx: Transaction,
  taskId: string,
): Promise<string[]> {
  const rows = await tx
    .update(deadLetters)
    .set({ redrivenAt: sql`now()` })
    .where(and(eq(deadLetters.taskId, taskId), isNull(deadLetters.redrivenAt)))
    .returning({ id: deadLetters.id });
  return rows.map((row) => row.id);
}

/** Deletes dead letters; returns the ids that existed (and are gone now). */
export async function purgeDeadLetters(
  executor: Executor,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await executor
    .delete(deadLetters)
    .where(inArray(deadLetters.id, [...ids]))
    .returning({ id: deadLetters.id });
  return rows.map((row) => row.id);
}

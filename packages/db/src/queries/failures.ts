/**
 * What the scheduler reads when a step failed for good: how often its repair step already ran for
 * it, the failed step's input (for the repair), and a dead letter another path wrote for it.
 */
import { and, eq, isNull, sql } from 'drizzle-orm';
import type { Json } from '@sluice/core';
import type { Executor } from '../client.js';
import { deadLetters, taskSteps } from '../schema.js';
import type { DeadLetterRecord } from './dead-letters.js';

/** The failed step's input and how many repairs of it the task already started. */
export interface RepairHistory {
  readonly input: Json;
  readonly repairsSoFar: number;
}

/** Which repairs {@link repairHistoryOf} counts. */
export interface RepairQuery {
  readonly taskId: string;
  /** The task's current attempt: a manual retry of the task starts the count again. */
  readonly taskAttempt: number;
  /** The failed step's sequence (whose input is read) and name. */
  readonly seq: number;
  readonly failedStep: string;
  readonly repairStep: string;
}

/**
 * Reads the input of the failed step and counts the steps of the task's current attempt named
 * `repairStep` that were started as repairs of `failedStep` (their input's `repairOf` names it).
 */
export async function repairHistoryOf(
  executor: Executor,
  query: RepairQuery,
): Promise<RepairHistory> {
  const { taskId, seq, failedStep, repairStep } = query;
  const [failed] = await executor
    .select({ input: taskSteps.input })
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), eq(taskSteps.seq, seq)));
  const [counted] = await executor
    .select({ repairs: sql<number>`count(*)::int` })
    .from(taskSteps)
    .where(
      and(
        eq(taskSteps.taskId, taskId),
        eq(taskSteps.taskAttempt, query.taskAttempt),
        eq(taskSteps.name, repairStep),
        sql`${taskSteps.input} ->> 'repairOf' = ${failedStep}`,
      ),
    );
  return { input: failed?.input ?? null, repairsSoFar: counted?.repairs ?? 0 };
}

/**
 * The dead letter not yet redriven of step `seq` of a task, written by whoever failed the step
 * outside the scheduler's attempts path (the advisory worker, the reconciler's dispatch cap).
 */
export async function openDeadLetterOfStep(
  executor: Executor,
  taskId: string,
  seq: number,
): Promise<DeadLetterRecord | undefined> {
  const [row] = await executor
    .select()
    .from(deadLetters)
    .where(
      and(
        eq(deadLetters.taskId, taskId),
        eq(deadLetters.stepSeq, seq),
        isNull(deadLetters.redrivenAt),
      ),
    )
    .limit(1);
  return row;
}

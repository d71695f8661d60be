/**
 * The step rows of a task: reading them, the executor's start, heartbeat and release of a dispatch,
 * and the steps a task adds, cancels or runs again. The scheduler's claim is in claim.ts, what it
 * records after publishing in publication.ts, the outcome pass's reads in unapplied-outcomes.ts,
 * settling in tasks-to-settle.ts and step retries in step-retries.ts.
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Json, Priority, SerializedStepError } from '@sluice/core';
import type { Executor } from '../client.js';
import { taskSteps } from '../schema.js';

/** A step row as stored. */
export type StepRecord = typeof taskSteps.$inferSelect;

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

/**
 * Records as failed, with `error`, a step that succeeded but whose continuation could not start (a
 * next step its task's pinned manifest does not declare, a bad fan-out, a branch asking for an
 * approval, an approval's `then`): its task fails with it, and a retry runs the step again, as it
 * runs every failed step. Left succeeded, the step would never run again and a retry would have
 * nothing to run. What the step asked for stays on its outcome as `result`, for the record.
 */
export async function failStepWhoseContinuationFailed(
  executor: Executor,
  taskId: string,
  seq: number,
  error: SerializedStepError,
): Promise<void> {
  await executor.execute(sql`
    update task_steps
    set status = 'failed',
        outcome = jsonb_build_object('type', 'failed', 'error', ${JSON.stringify(error)}::jsonb,
                                     'result', outcome)
    where task_id = ${taskId} and seq = ${seq} and status = 'succeeded'`);
}

/** Steps of a task that an executor holds or is about to (dispatched or running). */
export async function inFlightSteps(executor: Executor, taskId: string): Promise<StepRecord[]> {
  return executor
    .select()
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, taskId), inArray(taskSteps.status, ['dispatched', 'running'])));
}

/**
 * Whether a retry of the task would have a step to run: a failed or cancelled one to run again, or
 * one still in flight or waiting (a branch of the attempt the retry ends, which runs again in the
 * new attempt once it stops, or goes on with its branch).
 */
export async function hasStepsForRetry(executor: Executor, taskId: string): Promise<boolean> {
  const rows = await executor.execute<{ found: boolean }>(sql`
    select exists (
      select 1 from task_steps
      where task_id = ${taskId} and not superseded
        and status in ('failed', 'cancelled', 'ready', 'dispatched', 'running')
    ) as found`);
  return rows[0]?.found === true;
}

/**
 * On a manual retry: runs the task's failed and cancelled steps again, as new ready step rows of
 * the new attempt (the old rows stay, marked superseded, for the record). Succeeded steps are kept
 * and never run again. Returns the names of the steps re-run. Call with the task row locked.
 * `stepIds`: only these steps (a step of an earlier attempt that stopped after the retry).
 */
export async function rerunUnfinishedSteps(
  executor: Executor,
  task: { id: string; tenantId: string; priority: number; attempt: number },
  stepIds?: readonly number[],
): Promise<string[]> {
  const unfinished = await executor
    .update(taskSteps)
    .set({ superseded: true })
    .where(
      and(
        eq(taskSteps.taskId, task.id),
        inArray(taskSteps.status, ['failed', 'cancelled']),
        eq(taskSteps.superseded, false),
        stepIds === undefined ? undefined : inArray(taskSteps.id, [...stepIds]),
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

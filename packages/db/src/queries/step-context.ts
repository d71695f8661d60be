/**
 * What a running step's context reads and writes beyond its own row: the outputs of the steps
 * before it, the approval that let its task continue, and the progress it reports.
 */
import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Json } from '@sluice/core';
import type { Database, Executor } from '../client.js';
import { taskEvents, tasks } from '../schema.js';
import { appendTaskEvent } from './events.js';

/** The sequence number of a task's first step (the gateway creates it with the task). */
const FIRST_STEP_SEQ = 1;

/**
 * The outputs step `seq` of a task sees, by step name: for each name, the output of its latest
 * succeeded instance before this step. A step outside any fan-out branch sees the steps outside
 * branches (branch outputs reach it through the join's input); a branch step sees those and the
 * earlier steps of its own branch, never a sibling branch. The step's branch is read from its own
 * row, so the executor can send this read together with the step's start, before it has the row.
 */
export async function outputsBefore(
  executor: Executor,
  taskId: string,
  seq: number,
): Promise<Record<string, Json>> {
  // Steps are numbered from 1: the first has nothing before it (a query less per one-step task).
  if (seq <= FIRST_STEP_SEQ) return {};
  const [row] = await executor.execute<{ outputs: Record<string, Json> }>(
    sql`select ${outputsObject(sql`(select * from task_steps where task_id = ${taskId}::uuid and seq = ${seq}::int)`)} as outputs`,
  );
  return row?.outputs ?? {};
}

/** Whether a step at `seq` can see outputs of earlier steps (the first step cannot). */
export function hasStepsBefore(seq: number): boolean {
  return seq > FIRST_STEP_SEQ;
}

/**
 * A scalar subquery: the outputs the step row `me` sees (see {@link outputsBefore}) as one JSON
 * object by step name. `me` is a row source of `task_steps` rows (a subquery, or a CTE's name
 * when a statement starts the step and reads what it sees at once).
 */
export function outputsObject(me: SQL): SQL {
  // For a step outside branches `me.fan_out_of` is null, so the branch test is never true.
  return sql`(
    select coalesce(jsonb_object_agg(latest.name, latest.output), '{}'::jsonb)
    from (
      select distinct on (before.name) before.name, before.outcome -> 'output' as output
      from ${me} me
      join task_steps before on before.task_id = me.task_id and before.seq < me.seq
      where before.status = 'succeeded'
        and (before.fan_out_of is null
             or (before.fan_out_of = me.fan_out_of and before.branch_index = me.branch_index))
      order by before.name, before.seq desc
    ) latest
  )`;
}

/** The decision recorded by the latest `approve` event of a task. */
export interface RecordedApproval {
  readonly comment: string;
  readonly decidedAt: Date;
  /** The event's per-task sequence. */
  readonly seq: number;
}

/** The latest approval of a task, or `undefined` when it never was approved. */
export async function latestApproval(
  executor: Executor,
  taskId: string,
): Promise<RecordedApproval | undefined> {
  const [row] = await executor.execute<ApprovalColumns>(latestApprovalRow(sql`${taskId}::uuid`));
  return approvalOf(row);
}

/** The columns {@link latestApprovalRow} gives and {@link approvalOf} reads. */
export interface ApprovalColumns extends Record<string, unknown> {
  readonly approval_data: Record<string, Json> | null;
  readonly approval_created_at: unknown;
  readonly approval_seq: number | null;
}

/** The latest `approve` event of the task `taskId` (an expression) as {@link ApprovalColumns}. */
export function latestApprovalRow(taskId: SQL): SQL {
  return sql`select data as approval_data, created_at as approval_created_at, seq as approval_seq
    from task_events
    where task_id = ${taskId} and type = 'approve'
    order by seq desc
    limit 1`;
}

/** The approval in a row of {@link ApprovalColumns}; `undefined` for none (or a null-extended row). */
export function approvalOf(row: ApprovalColumns | undefined): RecordedApproval | undefined {
  if (!row || row.approval_seq === null) return undefined;
  const comment = row.approval_data?.['comment'];
  return {
    comment: typeof comment === 'string' ? comment : '',
    decidedAt: taskEvents.createdAt.mapFromDriverValue(row.approval_created_at) as Date,
    seq: Number(row.approval_seq),
  };
}

/** Progress reported by a running step. */
export interface StepProgress {
  readonly taskId: string;
  readonly step: string;
  readonly seq: number;
  /** 0 to 1. */
  readonly fraction: number;
  readonly message: string;
}

/**
 * Stores a step's progress on its task (what `GetTask` shows) and appends a `step_progress` event
 * (`data: { seq, progress, message }`) for watchers and subscribers, in one transaction. Only a
 * running task takes progress: a late report after the task moved on changes nothing. Returns
 * whether it was recorded.
 */
export async function recordStepProgress(db: Database, progress: StepProgress): Promise<boolean> {
  return db.transaction(async (tx) => {
    const updated = await tx
      .update(tasks)
      .set({ progress: progress.fraction, progressMessage: progress.message })
      .where(and(eq(tasks.id, progress.taskId), eq(tasks.status, 'running')))
      .returning({ id: tasks.id });
    if (updated.length === 0) return false;
    await appendTaskEvent(tx, {
      taskId: progress.taskId,
      type: 'step_progress',
      step: progress.step,
      data: { seq: progress.seq, progress: progress.fraction, message: progress.message },
    });
    return true;
  });
}

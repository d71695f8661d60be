/**
 * The scheduler's outcome pass reads the outcomes executors recorded but could not apply
 * themselves: locked with their tasks, then marked applied in the same transaction.
 */
import { sql } from 'drizzle-orm';
import type { StepOutcome } from '@sluice/core';
import type { Executor, Transaction } from '../client.js';
import { recordOf, prefixedColumns } from '../raw-rows.js';
import { taskSteps, tasks } from '../schema.js';
import { idList, literalLimit } from './batch-input.js';
import type { TaskRecord } from './tasks.js';

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
  /** The task attempt the step belongs to (a step may outlive its attempt: see the applier). */
  readonly taskAttempt: number;
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
      select id, task_id, seq, name, resource, outcome, attempts, task_attempt, fan_out_of,
        branch_index
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
      taskAttempt: row.task_attempt as number,
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

/**
 * The usual start of a dispatched step in one statement that commits on its own: the task's lock,
 * the step's start, what the start means for the task (the `start` transition of a queued task, or
 * a `step_started` event of a running one) and what the step sees of its task (earlier outputs,
 * the latest approval). One round trip instead of a transaction of four, on every step.
 *
 * "Usual" is a task that lets steps start without a question: queued or running, with no cancel,
 * pause or approval pending. For any other task, or a dispatch that may not start (stale, or
 * running elsewhere), the statement changes nothing and the caller takes its careful path (a
 * transaction that decides case by case).
 *
 * The `start` transition is still the table's: its allowed source states and its target come from
 * `decideTransition` in core, and it applies under the task's row lock taken by the same statement,
 * so no version check is needed (nothing can change the row between the read and the update).
 */
import { sql } from 'drizzle-orm';
import {
  allowedSourceStatuses,
  decideTransition,
  type Json,
  type TaskEvent,
  type TaskMachineState,
} from '@sluice/core';
import type { Executor } from '../client.js';
import { prefixedColumns, recordOf } from '../raw-rows.js';
import { taskSteps, tasks } from '../schema.js';
import {
  approvalOf,
  hasStepsBefore,
  latestApprovalRow,
  outputsObject,
  type ApprovalColumns,
  type RecordedApproval,
} from './step-context.js';
import type { StepDispatchRef, StepRecord } from './steps.js';
import type { TaskRecord } from './tasks.js';

/** What {@link startUsualStep} found and did. */
export type UsualStart =
  /** The step started; the task is as it was read (before the start), the step as started. */
  | {
      readonly started: true;
      readonly task: TaskRecord;
      readonly step: StepRecord;
      readonly outputs: Record<string, Json>;
      readonly approval: RecordedApproval | undefined;
    }
  /** Nothing changed: the task is not usual, or the dispatch may not start (see module doc). */
  | { readonly started: false; readonly task: TaskRecord };

const START: TaskEvent = { type: 'start' };
const QUEUED: TaskMachineState = {
  status: 'queued',
  cancelRequested: false,
  pauseRequested: false,
  approvalPending: false,
};
/** The table's answer for starting a queued task with no flags: the state it moves to. */
const STARTED = (() => {
  const decision = decideTransition(QUEUED, START);
  if (!decision.ok) throw new Error(`the transition table refuses to start a queued task`);
  return decision;
})();
/**
 * "The task starts now": its state is one the table lets `start` leave (a running task only
 * records a `step_started` fact). Raw SQL built once: the states are the table's constants.
 */
const STARTS = sql.raw(
  `task.status in (${allowedSourceStatuses(START)
    .map((status) => `'${status}'`)
    .join(', ')})`,
);

const TASK_COLUMNS = prefixedColumns(tasks, 'task');
const STEP_COLUMNS = prefixedColumns(taskSteps, 'started');

/**
 * Starts the dispatched step `ref` if its task is usual; undefined when there is no such task.
 * `staleAfterMs`: a step running elsewhere with an older heartbeat is taken over (see `startStep`).
 */
export async function startUsualStep(
  executor: Executor,
  ref: StepDispatchRef,
  staleAfterMs: number,
): Promise<UsualStart | undefined> {
  const outputs = hasStepsBefore(ref.seq) ? outputsObject(sql`started`) : sql`'{}'::jsonb`;
  const rows = await executor.execute<Record<string, unknown> & ApprovalColumns>(sql`
    with task as materialized (
      select * from tasks where id = ${ref.taskId}::uuid for update
    ), started as (
      update task_steps s
      set status = 'running', attempts = s.attempts + 1, started_at = now(), heartbeat_at = now()
      from task
      where (${STARTS} or task.status = 'running')
        and not task.cancel_requested and not task.pause_requested and not task.approval_pending
        and s.task_id = task.id and s.seq = ${ref.seq}::int and s.dispatch_count = ${ref.dispatch}::int
        and (s.status = 'dispatched'
             or (s.status = 'running'
                 and s.heartbeat_at < now() - make_interval(secs => ${staleAfterMs / 1_000}::float8)))
      returning s.*
    ), moved as (
      update tasks t
      set last_event_seq = t.last_event_seq + 1,
          updated_at = now(),
          status = case when ${STARTS} then ${STARTED.to.status}::text else t.status end,
          version = t.version + case when ${STARTS} then 1 else 0 end,
          attempt = t.attempt + case when ${STARTS} then ${STARTED.attemptIncrement}::int else 0 end,
          started_at = case when ${STARTS} then coalesce(t.started_at, now()) else t.started_at end,
          finished_at = case when ${STARTS} then null else t.finished_at end,
          current_step = case when ${STARTS} then started.name else t.current_step end,
          progress = case when ${STARTS} then 0 else t.progress end,
          progress_message = case when ${STARTS} then '' else t.progress_message end
      from task, started
      where t.id = task.id
      returning t.last_event_seq as seq, t.tenant_id
    ), appended as (
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select task.id, moved.tenant_id, moved.seq,
             case when ${STARTS} then ${START.type}::text else 'step_started' end,
             case when ${STARTS} then task.status end,
             case when ${STARTS} then ${STARTED.to.status}::text end,
             started.name, jsonb_build_object('seq', started.seq, 'attempt', started.attempts)
      from task, started, moved
    )
    select ${TASK_COLUMNS}, ${STEP_COLUMNS},
           case when started.id is null then null else ${outputs} end as outputs,
           approval.*
    from task
    left join started on true
    left join lateral (${latestApprovalRow(sql`task.id`)}) approval on started.id is not null`);
  const row = rows[0];
  if (!row) return undefined;
  const task = recordOf(tasks, row, 'task.');
  if (row['started.id'] === null) return { started: false, task };
  return {
    started: true,
    task,
    step: recordOf(taskSteps, row, 'started.'),
    outputs: (row['outputs'] as Record<string, Json> | null) ?? {},
    approval: approvalOf(row),
  };
}

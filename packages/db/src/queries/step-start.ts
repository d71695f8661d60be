/**
 * The usual start of a dispatched step in one statement that commits on its own: the task's lock,
 * the step's start, what the start means for the task (the `start` transition of a queued task, or
 * a `step_started` event of a running one) and what the step sees of its task (earlier outputs,
 * the latest approval). One round trip instead of a transaction of four, on every step; and one
 * statement for all the steps an executor starts together ({@link startUsualSteps}).
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
import { allowedSourceStatuses, type Json, type TaskEvent } from '@sluice/core';
import type { Executor } from '../client.js';
import { usualTransition } from '../transition.js';
import { prefixedColumns, recordOf } from '../raw-rows.js';
import { inputTaskIds } from './batch-input.js';
import { taskSteps, tasks } from '../schema.js';
import {
  approvalOf,
  hasStepsBefore,
  latestApprovalRow,
  outputsObject,
  type ApprovalColumns,
  type RecordedApproval,
} from './step-context.js';
import { isStreamSequence, type StepDispatchRef, type StepRecord } from './steps.js';
import { isUuid, type TaskRecord } from './tasks.js';

/** What {@link startUsualSteps} found and did for one dispatch. */
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
/** The table's answer for starting a queued task with no flags: the state it moves to. */
const STARTED = usualTransition('queued', START);
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
 * Starts each dispatched step of `refs` whose task is usual, in one statement (the executor's group
 * start: steps delivered together start together), answering for each in order: undefined when
 * there is no such task. `staleAfterMs`: a step running elsewhere with an older heartbeat is taken
 * over (see `startStep`). Tasks are locked in id order,
 * as every writer that locks several tasks does. Several steps of one task may start at once: the
 * first (in the order given) starts a queued task, the others record `step_started`, each event
 * next in the task's sequence — what starting them one after the other would have written.
 */
export async function startUsualSteps(
  executor: Executor,
  refs: readonly StepDispatchRef[],
  staleAfterMs: number,
): Promise<Array<UsualStart | undefined>> {
  // A reference no task can have (a task id that is no UUID, numbers beyond Postgres's int) is
  // answered "no such task" here: in the statement it would fail the whole group.
  const input = refs.flatMap((ref, ord) =>
    isUuid(ref.taskId) && isInt4(ref.seq) && isInt4(ref.dispatch)
      ? [
          {
            ord,
            task_id: ref.taskId,
            seq: ref.seq,
            dispatch: ref.dispatch,
            publish_seq: isStreamSequence(ref.publishSeq) ? ref.publishSeq : null,
          },
        ]
      : [],
  );
  const starts: Array<UsualStart | undefined> = refs.map(() => undefined);
  if (input.length === 0) return starts;
  const outputs = refs.some((ref) => hasStepsBefore(ref.seq))
    ? outputsObject(
        sql`(select started.task_id, started.seq, started.fan_out_of, started.branch_index)`,
      )
    : sql`'{}'::jsonb`;
  const rows = await executor.execute<Record<string, unknown> & ApprovalColumns>(sql`
    with input as (
      select * from jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        as i(ord int, task_id uuid, seq int, dispatch int, publish_seq bigint)
    ), task as materialized (
      select * from tasks where id = any(${inputTaskIds}) order by id for update
    ), started as (
      update task_steps s
      set status = 'running', attempts = s.attempts + 1, started_at = now(), heartbeat_at = now(),
          publish_seq = coalesce(i.publish_seq, s.publish_seq)
      from input i join task on task.id = i.task_id
      where (${STARTS} or task.status = 'running')
        and not task.cancel_requested and not task.pause_requested and not task.approval_pending
        and s.task_id = i.task_id and s.seq = i.seq and s.dispatch_count = i.dispatch
        and (s.status = 'dispatched'
             or (s.status = 'running'
                 and s.heartbeat_at < now() - make_interval(secs => ${staleAfterMs / 1_000}::float8)))
      returning s.*, i.ord
    ), per_task as (
      select task_id, count(*)::int as n, (array_agg(name order by ord))[1] as first_name
      from started
      group by task_id
    ), moved as (
      update tasks t
      set last_event_seq = t.last_event_seq + p.n,
          updated_at = now(),
          status = case when ${STARTS} then ${STARTED.status}::text else t.status end,
          version = t.version + case when ${STARTS} then 1 else 0 end,
          attempt = t.attempt + case when ${STARTS} then ${STARTED.attemptIncrement}::int else 0 end,
          started_at = case when ${STARTS} then coalesce(t.started_at, now()) else t.started_at end,
          finished_at = case when ${STARTS} then null else t.finished_at end,
          current_step = case when ${STARTS} then p.first_name else t.current_step end,
          progress = case when ${STARTS} then 0 else t.progress end,
          progress_message = case when ${STARTS} then '' else t.progress_message end
      from task, per_task p
      where t.id = task.id and p.task_id = task.id
      returning t.id, t.last_event_seq as seq, t.tenant_id
    ), appended as (
      -- The first step of a queued task starts it; the rest are facts, each next in sequence.
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select task.id, moved.tenant_id, moved.seq - p.n + st.k,
             case when ${STARTS} and st.k = 1 then ${START.type}::text else 'step_started' end,
             case when ${STARTS} and st.k = 1 then task.status end,
             case when ${STARTS} and st.k = 1 then ${STARTED.status}::text end,
             st.name, jsonb_build_object('seq', st.seq, 'attempt', st.attempts)
      from (select started.*, row_number() over (partition by task_id order by ord) as k
            from started) st
      join task on task.id = st.task_id
      join per_task p on p.task_id = st.task_id
      join moved on moved.id = st.task_id
      returning id
    ), outboxed as (
      insert into task_event_outbox (event_id) select id from appended
    )
    select input.ord, ${TASK_COLUMNS}, ${STEP_COLUMNS},
           case when started.id is null then null else ${outputs} end as outputs,
           approval.*
    from input
    join task on task.id = input.task_id
    left join started on started.ord = input.ord
    left join lateral (${latestApprovalRow(sql`task.id`)}) approval on started.id is not null`);
  for (const row of rows) starts[Number(row['ord'])] = startOf(row);
  return starts;
}

function isInt4(value: number): boolean {
  return Number.isInteger(value) && value >= -2_147_483_648 && value <= 2_147_483_647;
}

function startOf(row: Record<string, unknown> & ApprovalColumns): UsualStart {
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

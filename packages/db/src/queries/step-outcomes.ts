/**
 * The executor's outcome write: the outcomes of running steps recorded, each with its
 * `step_<status>` event, and the most common of them applied at once, in one transaction sent in
 * one write (one round trip, one commit for every outcome that finished meanwhile: the executor's
 * group commit).
 *
 * Applied here (what the scheduler's outcome pass would write, so that they cost no pass): the
 * usual completion (a `complete` outcome of a step outside any fan-out branch), the usual
 * continuation (a `next` to a step the task's pinned manifest declares, in or outside a branch),
 * a fan-out (its branches added to the ready queue) and the completion of a branch (and, with the
 * last branch, the join added). Usual means a task that runs with no cancel, pause or approval
 * pending. The outcomes of a task in one write apply together or not at all: one outcome of a step
 * outside any branch, or any number of branch outcomes (`complete` and `next`) of one fan-out.
 * Everything else (failures, approvals, cancellations, undeclared steps, flagged tasks) waits for
 * the scheduler's pass, as before. Tests compare what each writes on twin tasks
 * (step-outcomes.test.ts).
 *
 * Why a transaction with the task locks first: a branch's completion decides the join from its
 * siblings' rows, and a continuation numbers its step after the task's last. A single statement
 * reads those in the snapshot it took when it began, before it waited for a task lock that a
 * sibling's outcome write held, so two last branches finishing at once would each miss the other
 * and the join would never start. Here the locks are taken by a statement of their own, and the
 * write runs after it, in a snapshot taken once it holds them.
 */
import { sql, type SQL } from 'drizzle-orm';
import { MAX_FAN_OUT_BRANCHES, type Priority, type StepOutcome } from '@sluice/core';
import type { Database, Transaction } from '../client.js';
import { KeptConnection } from '../kept-connection.js';
import { rowsOf, transactionInOneWrite, type Rows } from '../one-write.js';
import { usualTransition } from '../transition.js';
import { inputTaskIds, textArrayOf } from './batch-input.js';
import { genericPlansForTransaction } from './plan-cache.js';
import { stepsLabel } from './steps-label.js';
import type { StepDispatchRef } from './steps.js';

/** A step's outcome to record, for the dispatch that ran it. */
export interface OutcomeToRecord {
  readonly ref: StepDispatchRef;
  readonly outcome: StepOutcome;
}

/**
 * What {@link recordStepOutcomes} did with one outcome:
 * - `completed`: recorded, and it completed its task (the usual completion);
 * - `continued`: recorded, and its task went on (`continue`): its next step, its branches, the
 *   completion of its branch, or with the last branch the join; `added` holds the steps the write
 *   added to the ready queue for the task, on the last of the task's outcomes in the write (none
 *   for a branch that completed before others);
 * - `recorded`: recorded, for the scheduler's outcome pass to apply;
 * - `stale`: nothing, the dispatch is stale (see {@link recordStepOutcome}).
 */
export type OutcomeRecording =
  | { readonly kind: 'completed' | 'recorded' | 'stale' }
  | { readonly kind: 'continued'; readonly added: readonly ReadyStepRef[] };

/** A step the outcome write added to the ready queue. */
export interface ReadyStepRef {
  readonly seq: number;
  readonly name: string;
  readonly resource: string;
  readonly priority: Priority;
}

/**
 * Records the outcome of a running step and its `step_<status>` event, in the caller's
 * transaction. Returns false when the dispatch is stale (another dispatch took the step over, or
 * an outcome is recorded already): at most one outcome per step.
 */
export async function recordStepOutcome(
  tx: Transaction,
  ref: StepDispatchRef,
  outcome: StepOutcome,
): Promise<boolean> {
  const [recorded] = await recordStepOutcomesIn(tx, [{ ref, outcome }]);
  return recorded?.kind !== 'stale';
}

/**
 * Records outcomes (and applies the usual ones) in a transaction of their own sent in one write:
 * on `writer`'s kept connection (the executor's outcome writer, one write at a time), or on a
 * connection of the pool reserved for it. Says, in order, what it did with each.
 */
export async function recordStepOutcomes(
  writer: Database | KeptConnection,
  outcomes: readonly OutcomeToRecord[],
): Promise<OutcomeRecording[]> {
  if (outcomes.length === 0) return [];
  const { lock, write } = outcomeWriteStatements(outcomes);
  // Generic plans first: the write is planned once per connection (a custom plan of it costs
  // several milliseconds, and its estimates do not depend on its parameter).
  const statements = [genericPlansForTransaction(), lock, write];
  const settled =
    writer instanceof KeptConnection
      ? await writer.transaction(statements)
      : await transactionInOneWrite(writer, statements);
  // A statement that failed rolled the transaction back: its error, whichever it was.
  for (const result of settled) rowsOf(result);
  return recordingsOf(outcomes, rowsOf(settled.at(-1)));
}

/** {@link recordStepOutcomes} in the caller's transaction (two round trips). */
export async function recordStepOutcomesIn(
  tx: Transaction,
  outcomes: readonly OutcomeToRecord[],
): Promise<OutcomeRecording[]> {
  if (outcomes.length === 0) return [];
  const { lock, write } = outcomeWriteStatements(outcomes);
  await tx.execute(lock);
  return recordingsOf(outcomes, await tx.execute(write));
}

/** A row of the outcome write: an outcome it recorded (missing: stale). */
interface OutcomeRow {
  readonly ord: number;
  readonly applied: 'completed' | 'continued' | null;
  readonly added: { seq: number; name: string; resource: string; priority: number }[] | null;
}

function recordingsOf(outcomes: readonly OutcomeToRecord[], rows: Rows): OutcomeRecording[] {
  const recorded = new Map(
    (rows as readonly unknown[] as readonly OutcomeRow[]).map((row) => [Number(row.ord), row]),
  );
  return outcomes.map((_, ord): OutcomeRecording => {
    const row = recorded.get(ord);
    if (row === undefined) return { kind: 'stale' };
    if (row.applied === 'completed') return { kind: 'completed' };
    if (row.applied === 'continued') {
      const added = (row.added ?? []).map((step) => ({
        seq: Number(step.seq),
        name: step.name,
        resource: step.resource,
        priority: Number(step.priority) as Priority,
      }));
      return { kind: 'continued', added };
    }
    return { kind: 'recorded' };
  });
}

/** The table's answers for completing and continuing a running task with no flags. */
const COMPLETED = usualTransition('running', { type: 'complete' });
const CONTINUED = usualTransition('running', { type: 'continue' });

/**
 * What an outcome asks for that the write may apply; the statement decides the rest (whether the
 * step is a branch, the task's state, the manifest). Left to the scheduler here: a continuation
 * with a JSON `null` input (the pass stores it as SQL `NULL`), a fan-out with a branch count the
 * pass refuses.
 */
function applicableOf(outcome: StepOutcome): {
  readonly applicable: 'complete' | 'next' | 'fanOut' | null;
  readonly steps: { name: string; input: unknown }[];
  readonly label: string | null;
  readonly join: string | null;
} {
  const none = { applicable: null, steps: [], label: null, join: null };
  switch (outcome.type) {
    case 'complete':
      return { ...none, applicable: 'complete' };
    case 'next':
      if (outcome.input === null) return none;
      return {
        applicable: 'next',
        steps: [{ name: outcome.step, input: outcome.input }],
        label: outcome.step,
        join: null,
      };
    case 'fanOut': {
      const { branches } = outcome;
      if (branches.length === 0 || branches.length > MAX_FAN_OUT_BRANCHES) return none;
      if (branches.some((branch) => branch.input === null)) return none;
      const names = branches.map((branch) => branch.step);
      return {
        applicable: 'fanOut',
        steps: branches.map((branch) => ({ name: branch.step, input: branch.input })),
        label: stepsLabel(names),
        join: outcome.join,
      };
    }
    default:
      return none;
  }
}

/**
 * The outcome write's statements, run in this order in one transaction: `lock` takes the task rows
 * in id order (as every writer locks a task before its steps, and as two writes must to never wait
 * for each other in a circle); `write` records and applies, reading them as locked.
 */
export function outcomeWriteStatements(outcomes: readonly OutcomeToRecord[]): {
  readonly lock: SQL;
  readonly write: SQL;
} {
  const taskIds = [...new Set(outcomes.map(({ ref }) => ref.taskId))];
  const lock = sql`
    select id from tasks where id = any(${textArrayOf(taskIds)}::uuid[]) order by id for update`;
  const write = outcomeWriteStatement(outcomes);
  return { lock, write };
}

/**
 * One statement (data-modifying CTEs) that records every outcome and applies those it may; see
 * the module comment. Each task's events: its steps' events first, in the order given, then its
 * transitions in the order of its steps' ids (the order the scheduler's pass applies them in).
 */
function outcomeWriteStatement(outcomes: readonly OutcomeToRecord[]): SQL {
  const input = outcomes.map(({ ref, outcome }, ord) => {
    const { applicable, steps, label, join } = applicableOf(outcome);
    return {
      ord,
      task_id: ref.taskId,
      seq: ref.seq,
      dispatch: ref.dispatch,
      status: outcomeStatus(outcome),
      outcome,
      applicable,
      new_steps: steps,
      label,
      join_step: join,
      data: {
        seq: ref.seq,
        ...(outcome.type === 'failed' ? { error: outcome.error.message } : {}),
      },
    };
  });
  return sql`
    with input as (
      -- The same dispatch twice: the first is recorded, the other is stale.
      select distinct on (task_id, seq, dispatch) *
      from jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
        as i(ord int, task_id uuid, seq int, dispatch int, status text, outcome jsonb,
             applicable text, new_steps jsonb, label text, join_step text, data jsonb)
      order by task_id, seq, dispatch, ord
    ), locked as materialized (
      -- Locked by the statement before, in this transaction: read as they are now.
      select id, status, cancel_requested, pause_requested, approval_pending, type, type_version,
             tenant_id, priority, attempt
      from tasks where id = any(${inputTaskIds})
    ), mine as materialized (
      -- The steps the outcomes finish, still running under their dispatch, locked: what else
      -- changes them (heartbeats, the reconciler) holds no task lock, and the write below must
      -- find every step decided on here. What each outcome would apply, given its step.
      select i.*, s.id as step_id, s.name, s.fan_out_of, s.branch_index,
             case when i.applicable = 'complete' and s.fan_out_of is null then 'completed'
                  when i.applicable = 'complete' then 'branch_done'
                  when i.applicable = 'next' then 'continued'
                  when i.applicable = 'fanOut' and s.fan_out_of is null then 'fanned'
             end as kind
      from input i
      join task_steps s on s.task_id = i.task_id and s.seq = i.seq
      -- The ids as an array too: through the (task, seq) key, not a scan of every step (see
      -- inputTaskIds).
      where s.task_id = any(${inputTaskIds})
        and s.dispatch_count = i.dispatch and s.status = 'running'
      order by s.id
      for update of s
    ), manifest as (
      -- The declared steps of the tasks whose outcomes add steps.
      select l.id as task_id, st ->> 'name' as name, st ->> 'resource' as resource
      from locked l
      join task_types tt on tt.name = l.type and tt.version = l.type_version
      cross join lateral jsonb_array_elements(tt.steps) st
      where l.id in (select task_id from mine where kind in ('continued', 'fanned', 'branch_done'))
    ), wanted as (
      -- The steps continuations and fan-outs ask for; a null resource: not declared.
      select m.task_id, m.step_id, e.idx::int as idx, e.value ->> 'name' as name,
             e.value -> 'input' as input, d.resource
      from mine m
      cross join lateral jsonb_array_elements(m.new_steps) with ordinality as e(value, idx)
      left join manifest d on d.task_id = m.task_id and d.name = e.value ->> 'name'
      where m.kind in ('continued', 'fanned')
    ), fan_outs as (
      -- The fan-out whose branches complete here (as joinIfComplete reads it): its join and
      -- branch count from the origin's outcome (a fan-out, or one after an approval), whether its
      -- join was added already, and the join's declared resource.
      select g.task_id, g.fan_out_of, spec.join_name, spec.branches, d.resource as join_resource,
             exists (select 1 from task_steps j
                     where j.task_id = g.task_id and j.join_of = g.fan_out_of
                       and not j.superseded) as joined
      from (select distinct task_id, fan_out_of from mine where kind = 'branch_done') g
      left join task_steps o on o.task_id = g.task_id and o.seq = g.fan_out_of
      cross join lateral (
        select case when o.outcome ->> 'type' = 'fanOut' then o.outcome
                    when o.outcome ->> 'type' = 'awaitApproval'
                         and o.outcome -> 'then' ->> 'type' = 'fanOut' then o.outcome -> 'then'
               end as fan_out
      ) x
      cross join lateral (
        select x.fan_out ->> 'join' as join_name,
               jsonb_array_length(x.fan_out -> 'branches') as branches
      ) spec
      left join manifest d on d.task_id = g.task_id and d.name = spec.join_name
    ), branch_outputs as (
      -- Every branch of those fan-outs done: by a step before (one that completed its branch),
      -- or by an outcome here.
      select s.task_id, s.fan_out_of, s.branch_index, s.outcome -> 'output' as output
      from task_steps s
      join fan_outs f on f.task_id = s.task_id and f.fan_out_of = s.fan_out_of
      where s.branch_index is not null and s.status = 'succeeded'
        and s.outcome ->> 'type' = 'complete'
      union all
      select task_id, fan_out_of, branch_index, outcome -> 'output'
      from mine where kind = 'branch_done'
    ), joins as (
      -- The joins to add: every branch done and no join yet; the outputs in branch order.
      select f.task_id, f.fan_out_of, f.join_name, f.join_resource,
             jsonb_build_object('outputs', (
               select jsonb_agg(b.output order by b.branch_index)
               from (select distinct on (branch_index) branch_index, output
                     from branch_outputs o
                     where o.task_id = f.task_id and o.fan_out_of = f.fan_out_of
                     order by branch_index) b)) as input
      from fan_outs f
      where not f.joined
        and (select count(distinct o.branch_index) from branch_outputs o
             where o.task_id = f.task_id and o.fan_out_of = f.fan_out_of) >= f.branches
    ), applying as (
      -- The tasks whose outcomes here apply, all together: the task runs with no flag set; one
      -- outcome that applies, or only branch outcomes of one fan-out; every step they add
      -- declared, the fan-out they finish readable.
      select g.task_id
      from (select task_id,
                   bool_and(kind is not null) as each_applies,
                   count(*) as outcomes,
                   bool_and(fan_out_of is not null and kind in ('continued', 'branch_done'))
                     as all_branches,
                   count(distinct fan_out_of) as fan_outs
            from mine group by task_id) g
      join locked l on l.id = g.task_id
      where g.each_applies and (g.outcomes = 1 or (g.all_branches and g.fan_outs = 1))
        and l.status = 'running' and not l.cancel_requested and not l.pause_requested
        and not l.approval_pending
        and not exists (select 1 from wanted w where w.task_id = g.task_id and w.resource is null)
        and not exists (select 1 from mine m
                        where m.task_id = g.task_id and m.kind = 'fanned'
                          and not exists (select 1 from manifest d
                                          where d.task_id = m.task_id and d.name = m.join_step))
        and not exists (select 1 from fan_outs f
                        where f.task_id = g.task_id and f.join_name is null)
        and not exists (select 1 from joins j
                        where j.task_id = g.task_id and j.join_resource is null)
    ), finished as (
      update task_steps s
      set status = m.status, outcome = m.outcome, finished_at = now(),
          outcome_applied_at = case when a.task_id is not null then now() end
      from mine m left join applying a on a.task_id = m.task_id
      where s.id = m.step_id
      returning s.id as step_id, s.task_id, s.seq, s.name, m.ord, m.status, m.data, m.kind,
                m.outcome, m.label, m.branch_index, a.task_id is not null as applies
    ), transitions as (
      -- The applied outcomes, in the order of their steps; a completed fan-out's join goes with
      -- the first branch completion (the one the pass would have found every branch done at).
      select f.task_id, f.step_id, f.name, f.kind, f.label, f.branch_index,
             nullif(f.outcome -> 'output', 'null'::jsonb) as output,
             row_number() over (partition by f.task_id order by f.step_id) as rank,
             j.join_name,
             coalesce(f.kind = 'branch_done' and j.task_id is not null
                      and f.step_id = min(f.step_id) filter (where f.kind = 'branch_done')
                                        over (partition by f.task_id), false) as carries_join
      from finished f
      left join joins j on j.task_id = f.task_id
      where f.applies
    ), patched as (
      -- What each transition sets the task's current step to (completion: none; a branch
      -- completion only with its join).
      select t.*,
             case t.kind when 'completed' then null
                         when 'branch_done' then t.join_name
                         else t.label end as current_step,
             t.kind <> 'branch_done' or t.carries_join as patches
      from transitions t
    ), new_steps as (
      -- The steps added, as insertSteps adds them: after the task's last step, in the order of
      -- the outcomes' steps, then their own order.
      insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input,
                              task_attempt, fan_out_of, branch_index, join_of, key_seq)
      select a.task_id, last.seq + a.position, a.name, a.resource, l.tenant_id, l.priority,
             'ready', a.input, l.attempt, a.fan_out_of, a.branch_index, a.join_of, null
      from (
        select w.task_id, w.name, w.resource, w.input,
               case when m.kind = 'fanned' then m.seq else m.fan_out_of end as fan_out_of,
               case when m.kind = 'fanned' then w.idx - 1 else m.branch_index end as branch_index,
               null::int as join_of,
               row_number() over (partition by w.task_id order by w.step_id, w.idx) as position
        from wanted w
        join mine m on m.step_id = w.step_id
        where w.task_id in (select task_id from applying)
        union all
        select j.task_id, j.join_name, j.join_resource, j.input, null, null, j.fan_out_of, 1
        from joins j
        where j.task_id in (select task_id from applying)
      ) a
      join locked l on l.id = a.task_id
      cross join lateral (
        select coalesce(max(q.seq), 0) as seq from task_steps q where q.task_id = a.task_id
      ) last
      -- Ids in the order of the sequences, as a multi-row insert of insertSteps gives them.
      order by a.task_id, a.position
      returning task_id, seq, name, resource, priority
    ), per_task as (
      select f.task_id, count(*)::int as recorded, count(p.step_id)::int as applied,
             coalesce(bool_or(p.kind = 'completed'), false) as completes,
             (array_agg(p.output) filter (where p.kind = 'completed'))[1] as output,
             coalesce(bool_or(p.patches), false) as patches,
             (array_agg(p.current_step order by p.step_id desc)
                filter (where p.patches))[1] as current_step
      from finished f
      left join patched p on p.step_id = f.step_id
      group by f.task_id
    ), bumped as (
      -- The transitions' columns as applyTransition sets them for 'complete' and 'continue' of a
      -- running task with no flags (keep them in step).
      update tasks t
      set last_event_seq = t.last_event_seq + p.recorded + p.applied,
          updated_at = now(),
          status = case when p.applied = 0 then t.status
                        when p.completes then ${COMPLETED.status}::text
                        else ${CONTINUED.status}::text end,
          version = t.version + p.applied,
          attempt = t.attempt + p.applied * case when p.completes
                                                 then ${COMPLETED.attemptIncrement}::int
                                                 else ${CONTINUED.attemptIncrement}::int end,
          finished_at = case when p.applied = 0 then t.finished_at
                             when p.completes then now() end,
          current_step = case when p.patches then p.current_step else t.current_step end,
          progress = case when p.patches then 0 else t.progress end,
          progress_message = case when p.patches then '' else t.progress_message end,
          error = case when p.completes then null else t.error end,
          output = case when p.completes then p.output else t.output end
      from per_task p
      where t.id = p.task_id
      returning t.id, t.tenant_id, t.last_event_seq
    ), appended as (
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select f.task_id, b.tenant_id,
             b.last_event_seq - p.applied - p.recorded
               + row_number() over (partition by f.task_id order by f.ord),
             'step_' || f.status, null, null, f.name, f.data
      from finished f
      join bumped b on b.id = f.task_id
      join per_task p on p.task_id = f.task_id
      union all
      select t.task_id, b.tenant_id, b.last_event_seq - p.applied + t.rank,
             case t.kind when 'completed' then 'complete' else 'continue' end,
             'running',
             case t.kind when 'completed' then ${COMPLETED.status}::text
                         else ${CONTINUED.status}::text end,
             t.name,
             case t.kind
               when 'completed' then null
               when 'branch_done' then jsonb_build_object('branch', t.branch_index)
                 || case when t.carries_join then jsonb_build_object('join', t.join_name)
                         else '{}'::jsonb end
               else jsonb_build_object('next', (select jsonb_agg(w.name order by w.idx)
                                                from wanted w where w.step_id = t.step_id))
             end
      from transitions t
      join bumped b on b.id = t.task_id
      join per_task p on p.task_id = t.task_id
      returning id
    ), outboxed as (
      insert into task_event_outbox (event_id) select id from appended
    )
    select f.ord,
           case when t.step_id is null then null
                when t.kind = 'completed' then 'completed'
                else 'continued' end as applied,
           case when t.rank = p.applied then
             (select jsonb_agg(jsonb_build_object('seq', n.seq, 'name', n.name,
                                                  'resource', n.resource, 'priority', n.priority)
                               order by n.seq)
              from new_steps n where n.task_id = f.task_id) end as added
    from finished f
    left join transitions t on t.step_id = f.step_id
    left join per_task p on p.task_id = f.task_id`;
}

function outcomeStatus(outcome: StepOutcome): 'failed' | 'cancelled' | 'succeeded' {
  return outcome.type === 'failed'
    ? 'failed'
    : outcome.type === 'cancelled'
      ? 'cancelled'
      : 'succeeded';
}

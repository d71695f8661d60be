/**
 * The one transition function. Every change of a task's state, whoever asks for it, goes through
 * here: the transition table of `core` decides, then a conditional update
 * (`WHERE status = ANY(allowed) AND version = seen`) changes the row and an event row with the next
 * per-task sequence records it — in the caller's transaction, so the change, the event and whatever
 * else the caller writes commit together or not at all.
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import {
  allowedSourceStatuses,
  decideTransition,
  isFinalStatus,
  isTaskStatus,
  type Json,
  type SerializedStepError,
  type TaskEvent,
  type TaskMachineState,
  type TaskStatus,
} from '@sluice/core';
import type { Database, Executor } from './client.js';
import { taskEvents, tasks, type PendingApproval } from './schema.js';
import { inputTaskIds } from './queries/batch-input.js';

/** One requested transition. */
export interface TransitionRequest {
  readonly taskId: string;
  /** When set, the task must belong to this tenant; another tenant's task is "not found". */
  readonly tenantId?: string;
  readonly event: TaskEvent;
  /** The step the event is about, recorded on the event. */
  readonly step?: string | null;
  /** Extra facts for the event row (comment, reason, error …). */
  readonly data?: Record<string, Json>;
  /** Columns to change together with the state. */
  readonly patch?: TransitionPatch;
  /**
   * The task's row as the caller read it `for update` in this same transaction: decided on
   * without reading it again (a round trip less on the hot paths that lock the task first).
   */
  readonly locked?: LockedTaskState;
}

/** The columns of a task row a transition decides on. */
export type LockedTaskState = Pick<
  typeof tasks.$inferSelect,
  'status' | 'cancelRequested' | 'pauseRequested' | 'approvalPending' | 'version'
>;

/** Task columns a transition may change besides its state. */
export interface TransitionPatch {
  /** The step running or waiting now; changing it also resets the reported progress. */
  readonly currentStep?: string | null;
  readonly error?: SerializedStepError | null;
  readonly output?: Json;
  readonly approval?: PendingApproval | null;
}

/** The outcome of one request. */
export type TransitionResult =
  | {
      readonly ok: true;
      readonly taskId: string;
      readonly tenantId: string;
      readonly from: TaskMachineState;
      readonly to: TaskMachineState;
      /** The sequence number of the recorded event. */
      readonly seq: number;
    }
  | {
      readonly ok: false;
      readonly taskId: string;
      /**
       * `not_found`: no such task (for this tenant); `refused`: the table does not allow it;
       * `conflict`: the task kept changing concurrently, so trying again may succeed.
       */
      readonly code: 'not_found' | 'refused' | 'conflict';
      readonly reason: string;
    };

/**
 * How often a transition re-reads the task after a concurrent change moved its version. A conflict
 * means someone else changed the task between our read and our update; re-deciding on the new state
 * gives exactly one winner when the two are incompatible, and lets both apply when they are not.
 */
const MAX_CONFLICT_RETRIES = 5;

/**
 * The table's answer for `event` on a task in `status` with no flags: the state it moves to and
 * its attempt increment. For the statements that apply one transition to every such task they
 * lock, without a request each (the executor's group start and group outcome write), decided
 * once at load. Throws when the table refuses it, leaves no state, or sets a flag.
 */
export function usualTransition(
  status: TaskStatus,
  event: TaskEvent,
): { readonly status: TaskStatus; readonly attemptIncrement: number } {
  const from: TaskMachineState = {
    status,
    cancelRequested: false,
    pauseRequested: false,
    approvalPending: false,
  };
  const decision = decideTransition(from, event);
  if (!decision.ok)
    throw new Error(`the transition table refuses ${event.type} of a ${status} task`);
  const { to } = decision;
  if (to.status === null || to.cancelRequested || to.pauseRequested || to.approvalPending) {
    throw new Error(`the transition table leaves no state or sets a flag on ${event.type}`);
  }
  return { status: to.status, attemptIncrement: decision.attemptIncrement };
}

/**
 * Applies one transition inside `executor` (a transaction, or the pool for a single statement
 * pair — prefer a transaction). Never throws for a refused transition; throws only on database
 * errors.
 */
export async function applyTransition(
  executor: Executor,
  request: TransitionRequest,
): Promise<TransitionResult> {
  const allowed = allowedSourceStatuses(request.event);
  for (let tries = 0; tries <= MAX_CONFLICT_RETRIES; tries++) {
    const current =
      tries === 0 && request.locked
        ? machineStateOf(request.taskId, request.locked)
        : await readMachineState(executor, request);
    if (!current) {
      return { ok: false, taskId: request.taskId, code: 'not_found', reason: 'task not found' };
    }
    const decision = decideTransition(current.state, request.event);
    if (!decision.ok) {
      return { ok: false, taskId: request.taskId, code: 'refused', reason: decision.reason };
    }
    const to = decision.to;
    const toStatus = to.status as TaskStatus;
    const becameFinal = isFinalStatus(toStatus);
    const patch = request.patch ?? {};
    const update = executor
      .update(tasks)
      .set({
        status: toStatus,
        cancelRequested: to.cancelRequested,
        pauseRequested: to.pauseRequested,
        approvalPending: to.approvalPending,
        version: sql`${tasks.version} + 1`,
        lastEventSeq: sql`${tasks.lastEventSeq} + 1`,
        attempt: sql`${tasks.attempt} + ${decision.attemptIncrement}`,
        updatedAt: sql`now()`,
        ...(request.event.type === 'start'
          ? { startedAt: sql`coalesce(${tasks.startedAt}, now())` }
          : {}),
        ...(becameFinal ? { finishedAt: sql`now()` } : { finishedAt: null }),
        ...(request.event.type === 'retry' ? { error: null, output: null } : {}),
        ...('currentStep' in patch
          ? { currentStep: patch.currentStep, progress: 0, progressMessage: '' }
          : {}),
        ...('approval' in patch ? { approval: patch.approval } : {}),
        ...('error' in patch ? { error: patch.error } : {}),
        ...('output' in patch ? { output: patch.output } : {}),
      })
      .where(
        and(
          eq(tasks.id, request.taskId),
          eq(tasks.version, current.version),
          inArray(tasks.status, allowed),
        ),
      )
      .returning({ seq: tasks.lastEventSeq, tenantId: tasks.tenantId });
    // The update and its event in one statement (a data-modifying CTE): a round trip less on
    // every transition. No row: a concurrent change moved the version, and nothing was inserted.
    const data = eventData(request);
    const rows = await executor.execute<{ seq: number; tenant_id: string }>(sql`
      with updated as (${update.getSQL()}),
      appended as (
        insert into ${taskEvents} (task_id, tenant_id, seq, type, from_status, to_status, step, data)
        select ${request.taskId}::uuid, updated.tenant_id, updated.last_event_seq,
               ${request.event.type}::text, ${current.state.status}::text, ${toStatus}::text,
               ${request.step ?? null}::text, ${data === null ? null : JSON.stringify(data)}::jsonb
        from updated
        returning id, seq, tenant_id
      ),
      outboxed as (insert into task_event_outbox (event_id) select id from appended)
      select seq, tenant_id from appended`);
    const inserted = rows[0];
    if (!inserted) continue; // decide again on the new state
    const row = { seq: Number(inserted.seq), tenantId: inserted.tenant_id };
    return {
      ok: true,
      taskId: request.taskId,
      tenantId: row.tenantId,
      from: current.state,
      to,
      seq: row.seq,
    };
  }
  return {
    ok: false,
    taskId: request.taskId,
    code: 'conflict',
    reason: 'the task kept changing concurrently; try again',
  };
}

/**
 * Applies several transitions in one transaction and one commit (the batched hot path of the
 * scheduler). Each result says whether its request applied; a refused request does not undo the
 * others.
 */
export async function applyTransitions(
  db: Database,
  requests: readonly TransitionRequest[],
): Promise<TransitionResult[]> {
  if (requests.length === 0) return [];
  return db.transaction(async (tx) => {
    const results: TransitionResult[] = [];
    for (const request of requests) results.push(await applyTransition(tx, request));
    return results;
  });
}

/**
 * Applies transitions of tasks the caller has locked in this transaction (each request carries
 * `locked`, the row as read `for update`; no two requests name the same task) in one statement:
 * the batched form of {@link applyTransition} for a pass that moves many tasks at once (the
 * scheduler completing tasks whose last step succeeded). Each request is decided by the same
 * table on the same state and writes the same columns and event as {@link applyTransition} would
 * (a test applies both to twin tasks and compares the rows). A request the statement did not
 * apply (its row changed after all) is applied again alone, re-reading the task.
 */
export async function applyLockedTransitions(
  executor: Executor,
  requests: readonly TransitionRequest[],
): Promise<TransitionResult[]> {
  const results: Array<TransitionResult | undefined> = requests.map(() => undefined);
  const input: Array<Record<string, Json>> = [];
  const decided = new Map<number, { from: TaskMachineState; to: TaskMachineState }>();
  const seen = new Set<string>();
  requests.forEach((request, index) => {
    if (!request.locked) throw new Error(`transition of task ${request.taskId} without its lock`);
    if (seen.has(request.taskId)) throw new Error(`two transitions of task ${request.taskId}`);
    seen.add(request.taskId);
    const current = machineStateOf(request.taskId, request.locked);
    const decision = decideTransition(current.state, request.event);
    if (!decision.ok) {
      results[index] = {
        ok: false,
        taskId: request.taskId,
        code: 'refused',
        reason: decision.reason,
      };
      return;
    }
    decided.set(index, { from: current.state, to: decision.to });
    const patch = request.patch ?? {};
    input.push({
      ord: index,
      task_id: request.taskId,
      version: current.version,
      allowed: allowedSourceStatuses(request.event),
      to_status: decision.to.status,
      cancel_requested: decision.to.cancelRequested,
      pause_requested: decision.to.pauseRequested,
      approval_pending: decision.to.approvalPending,
      attempt_increment: decision.attemptIncrement,
      starts: request.event.type === 'start',
      final: isFinalStatus(decision.to.status as TaskStatus),
      retry: request.event.type === 'retry',
      set_current_step: 'currentStep' in patch,
      current_step: patch.currentStep ?? null,
      set_approval: 'approval' in patch,
      approval: (patch.approval ?? null) as Json,
      set_error: 'error' in patch,
      error: (patch.error ?? null) as Json,
      set_output: 'output' in patch,
      output: patch.output ?? null,
      event_type: request.event.type,
      from_status: current.state.status,
      step: request.step ?? null,
      data: eventData(request),
    });
  });
  if (input.length > 0) {
    // The columns as applyTransition sets them (keep the two in step).
    const rows = await executor.execute<{ ord: number; seq: number; tenant_id: string }>(sql`
      with input as (
        select * from jsonb_to_recordset(${JSON.stringify(input)}::jsonb) as i(
          ord int, task_id uuid, version int, allowed text[], to_status text,
          cancel_requested boolean, pause_requested boolean, approval_pending boolean,
          attempt_increment int, starts boolean, final boolean, retry boolean,
          set_current_step boolean, current_step text, set_approval boolean, approval jsonb,
          set_error boolean, error jsonb, set_output boolean, output jsonb,
          event_type text, from_status text, step text, data jsonb)
      ), updated as (
        update tasks t
        set status = i.to_status,
            cancel_requested = i.cancel_requested,
            pause_requested = i.pause_requested,
            approval_pending = i.approval_pending,
            version = t.version + 1,
            last_event_seq = t.last_event_seq + 1,
            attempt = t.attempt + i.attempt_increment,
            updated_at = now(),
            started_at = case when i.starts then coalesce(t.started_at, now()) else t.started_at end,
            finished_at = case when i.final then now() end,
            current_step = case when i.set_current_step then i.current_step else t.current_step end,
            progress = case when i.set_current_step then 0 else t.progress end,
            progress_message = case when i.set_current_step then '' else t.progress_message end,
            approval = case when i.set_approval then i.approval else t.approval end,
            error = case when i.set_error then i.error when i.retry then null else t.error end,
            output = case when i.set_output then i.output when i.retry then null else t.output end
        from input i
        where t.id = any(${inputTaskIds}) and t.id = i.task_id
          and t.version = i.version and t.status = any(i.allowed)
        returning t.id, t.tenant_id, t.last_event_seq
      ), appended as (
        insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
        select u.id, u.tenant_id, u.last_event_seq, i.event_type, i.from_status, i.to_status,
               i.step, i.data
        from updated u join input i on i.task_id = u.id
        returning id, task_id, seq, tenant_id
      ),
      outboxed as (insert into task_event_outbox (event_id) select id from appended)
      select i.ord, a.seq, a.tenant_id from appended a join input i on i.task_id = a.task_id`);
    for (const row of rows) {
      const index = Number(row.ord);
      const request = requests[index] as TransitionRequest;
      const { from, to } = decided.get(index) as { from: TaskMachineState; to: TaskMachineState };
      results[index] = {
        ok: true,
        taskId: request.taskId,
        tenantId: row.tenant_id,
        from,
        to,
        seq: Number(row.seq),
      };
    }
  }
  const settled: TransitionResult[] = [];
  for (const [index, request] of requests.entries()) {
    // Not applied by the statement: the row moved on after all; decide again on what it is now.
    const { locked: _seen, ...unlocked } = request;
    settled.push(results[index] ?? (await applyTransition(executor, unlocked)));
  }
  return settled;
}

function eventData(request: TransitionRequest): Record<string, Json> | null {
  const data: Record<string, Json> = { ...(request.data ?? {}) };
  // What eventFromRecord needs to rebuild the event from the row.
  if (request.event.type === 'approval_timeout') data['on_timeout'] = request.event.onTimeout;
  if (request.event.type === 'pause_completed' && request.event.approvalPending) {
    data['approval_pending'] = true;
  }
  if (request.event.type === 'resume' && request.event.retryWaiting === true) {
    data['retry_waiting'] = true;
  }
  return Object.keys(data).length > 0 ? data : null;
}

async function readMachineState(
  executor: Executor,
  request: TransitionRequest,
): Promise<{ state: TaskMachineState; version: number } | undefined> {
  const rows = await executor
    .select({
      status: tasks.status,
      cancelRequested: tasks.cancelRequested,
      pauseRequested: tasks.pauseRequested,
      approvalPending: tasks.approvalPending,
      version: tasks.version,
    })
    .from(tasks)
    .where(
      request.tenantId === undefined
        ? eq(tasks.id, request.taskId)
        : and(eq(tasks.id, request.taskId), eq(tasks.tenantId, request.tenantId)),
    );
  const row = rows[0];
  return row && machineStateOf(request.taskId, row);
}

function machineStateOf(
  taskId: string,
  row: LockedTaskState,
): { state: TaskMachineState; version: number } {
  if (!isTaskStatus(row.status)) throw new Error(`task ${taskId} has unknown status ${row.status}`);
  return {
    state: {
      status: row.status,
      cancelRequested: row.cancelRequested,
      pauseRequested: row.pauseRequested,
      approvalPending: row.approvalPending,
    },
    version: row.version,
  };
}

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
      /** `not_found`: no such task (for this tenant); `refused`: the table does not allow it. */
      readonly code: 'not_found' | 'refused';
      readonly reason: string;
    };

/**
 * How often a transition re-reads the task after a concurrent change moved its version. A conflict
 * means someone else changed the task between our read and our update; re-deciding on the new state
 * gives exactly one winner when the two are incompatible, and lets both apply when they are not.
 */
const MAX_CONFLICT_RETRIES = 5;

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
      with updated as (${update.getSQL()})
      insert into ${taskEvents} (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select ${request.taskId}::uuid, updated.tenant_id, updated.last_event_seq,
             ${request.event.type}::text, ${current.state.status}::text, ${toStatus}::text,
             ${request.step ?? null}::text, ${data === null ? null : JSON.stringify(data)}::jsonb
      from updated
      returning ${taskEvents.seq} as seq, ${taskEvents.tenantId} as tenant_id`);
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
    code: 'refused',
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

function eventData(request: TransitionRequest): Record<string, Json> | null {
  const data: Record<string, Json> = { ...(request.data ?? {}) };
  // What eventFromRecord needs to rebuild the event from the row.
  if (request.event.type === 'approval_timeout') data['on_timeout'] = request.event.onTimeout;
  if (request.event.type === 'pause_completed' && request.event.approvalPending) {
    data['approval_pending'] = true;
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

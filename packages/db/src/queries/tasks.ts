/**
 * Creating and reading tasks.
 */
import { and, asc, desc, eq, gt, gte, lt, or, sql } from 'drizzle-orm';
import { SluiceError, type Json, type Priority, type TaskStatus } from '@sluice/core';
import type { Database, Executor } from '../client.js';
import { recordOf } from '../raw-rows.js';
import { taskEvents, tasks, type PendingApproval } from '../schema.js';
import { idList } from './batch-input.js';
import type { IdempotencyTombstone } from './retention.js';
import { submitTasks } from './task-batch.js';
import type { TaskTypeManifest } from './task-types.js';

/** A task row as stored. */
export type TaskRecord = typeof tasks.$inferSelect;
/** An event row as stored. */
export type TaskEventRecord = typeof taskEvents.$inferSelect;

/** What the gateway has validated before creating a task. */
export interface NewTask {
  readonly tenantId: string;
  readonly taskType: TaskTypeManifest;
  readonly priority: Priority;
  readonly input: Json;
  readonly idempotencyKey?: string;
  readonly traceId?: string;
  readonly traceParent?: string;
}

/** The task and whether this call created it (false: an idempotent repeat). */
export interface CreateTaskResult {
  readonly task: TaskRecord;
  readonly created: boolean;
}

/** What {@link submitTask} did. */
export type SubmitTaskResult =
  | { readonly kind: 'created'; readonly task: TaskRecord }
  /** An idempotent repeat of a task that still exists. */
  | { readonly kind: 'existing'; readonly task: TaskRecord }
  /**
   * An idempotent repeat of a task that retention has deleted since: only its tombstone is left,
   * naming the original task; nothing was created.
   */
  | { readonly kind: 'deleted'; readonly tombstone: IdempotencyTombstone };

/**
 * Records a new task, its `create` event and its first step (ready, due now) atomically.
 *
 * With an idempotency key, a repeat returns the existing task when its type, priority and input
 * match, and throws an `already_exists` {@link SluiceError} when they differ. Concurrent repeats are
 * safe: the unique index on (tenant, key) makes one insert win and the others read it.
 *
 * A repeat of a task retention deleted also throws `already_exists` (there is no task to return);
 * the gateway uses {@link submitTask}, which answers such a repeat from the key's tombstone.
 */
export async function createTask(db: Database, task: NewTask): Promise<CreateTaskResult> {
  const result = await submitTask(db, task);
  if (result.kind === 'deleted') {
    throw new SluiceError(
      'already_exists',
      `idempotency key "${result.tombstone.idempotencyKey}" was used for task ${result.tombstone.taskId}, which has finished and been deleted`,
      { field: 'idempotency_key' },
    );
  }
  return { task: result.task, created: result.kind === 'created' };
}

/**
 * {@link createTask}, also for a key whose task retention has deleted: while the key's tombstone
 * lives, a repeat with the same type, priority and input answers `deleted` with the tombstone (the
 * original task id) and creates nothing; a different one throws `already_exists`, as for a task
 * that still exists.
 */
export async function submitTask(db: Database, task: NewTask): Promise<SubmitTaskResult> {
  // A batch of one: the same statement, and with a key the same transaction, as `CreateTasks`.
  const [result] = await submitTasks(db, [task]);
  if (!result) throw new Error('the create answered nothing');
  return result;
}

/** A task of a tenant, or `undefined` (also for another tenant's task). */
export async function findTask(
  executor: Executor,
  tenantId: string,
  taskId: string,
): Promise<TaskRecord | undefined> {
  if (!isUuid(taskId)) return undefined;
  const rows = await executor
    .select()
    .from(tasks)
    .where(and(eq(tasks.id, taskId), eq(tasks.tenantId, tenantId)));
  return rows[0];
}

/** Reads a task and locks its row until the transaction ends (any tenant; for services). */
export async function lockTask(
  executor: Executor,
  taskId: string,
): Promise<TaskRecord | undefined> {
  const rows = await executor.select().from(tasks).where(eq(tasks.id, taskId)).for('update');
  return rows[0];
}

/**
 * Keeps the approval a step asked for on a task whose cancel was requested while the step ran: the
 * task does not wait for it (it ends cancelled), but a retry asks for it again, as it does for a
 * task cancelled while it waited. Call with the task row locked.
 */
export async function keepApprovalForRetry(
  executor: Executor,
  taskId: string,
  approval: PendingApproval,
): Promise<void> {
  await executor
    .update(tasks)
    .set({ approval, version: sql`${tasks.version} + 1`, updatedAt: sql`now()` })
    .where(eq(tasks.id, taskId));
}

/**
 * Reads tasks and locks their rows until the transaction ends, in one statement and in id order
 * (the order every writer that locks several tasks uses, so two such never wait in a circle).
 * Unknown ids are left out.
 */
export async function lockTasks(
  executor: Executor,
  taskIds: readonly string[],
): Promise<Map<string, TaskRecord>> {
  const ids = [...new Set(taskIds)];
  if (ids.length === 0) return new Map();
  // Written out rather than built: the outcome pass locks the tasks of every batch of outcomes, and
  // the query builder's CPU per statement is a visible share of the scheduler's.
  const rows = await executor.execute<Record<string, unknown>>(sql`
    select * from tasks where id in ${idList(ids)} order by id for update`);
  return new Map(
    rows.map((raw) => {
      const row = recordOf(tasks, raw);
      return [row.id, row];
    }),
  );
}

/** Filters and page of {@link listTasks}. */
export interface ListTasksQuery {
  readonly tenantId: string;
  readonly status?: TaskStatus;
  readonly type?: string;
  readonly priority?: Priority;
  /** Created at or after this time. */
  readonly createdAfter?: Date;
  /** Created before this time. */
  readonly createdBefore?: Date;
  readonly limit: number;
  /** The cursor of the previous page: the last task's creation time and id. */
  readonly after?: { readonly createdAt: Date; readonly id: string };
}

/** A tenant's tasks, newest first, by keyset pagination. */
export async function listTasks(executor: Executor, query: ListTasksQuery): Promise<TaskRecord[]> {
  const conditions = [eq(tasks.tenantId, query.tenantId)];
  if (query.status) conditions.push(eq(tasks.status, query.status));
  if (query.type) conditions.push(eq(tasks.type, query.type));
  if (query.priority !== undefined) conditions.push(eq(tasks.priority, query.priority));
  if (query.createdAfter) conditions.push(gte(tasks.createdAt, query.createdAfter));
  if (query.createdBefore) conditions.push(lt(tasks.createdAt, query.createdBefore));
  if (query.after) {
    const { createdAt, id } = query.after;
    const before = or(
      lt(tasks.createdAt, createdAt),
      and(eq(tasks.createdAt, createdAt), lt(tasks.id, id)),
    );
    if (before) conditions.push(before);
  }
  return executor
    .select()
    .from(tasks)
    .where(and(...conditions))
    .orderBy(desc(tasks.createdAt), desc(tasks.id))
    .limit(query.limit);
}

/** A task's events after sequence `afterSeq`, oldest first. */
export async function listTaskEvents(
  executor: Executor,
  taskId: string,
  afterSeq: number,
  limit = 1_000,
): Promise<TaskEventRecord[]> {
  return executor
    .select()
    .from(taskEvents)
    .where(and(eq(taskEvents.taskId, taskId), gt(taskEvents.seq, afterSeq)))
    .orderBy(asc(taskEvents.seq))
    .limit(limit);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a syntactically valid UUID (task ids); anything else cannot name a task. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

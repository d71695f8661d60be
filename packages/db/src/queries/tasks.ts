/**
 * Creating and reading tasks.
 */
import { createHash } from 'node:crypto';
import { and, asc, desc, eq, gt, gte, inArray, lt, or, sql, type SQL } from 'drizzle-orm';
import {
  NO_TASK,
  SluiceError,
  decideTransition,
  type Json,
  type Priority,
  type TaskStatus,
} from '@sluice/core';
import type { Database, Executor } from '../client.js';
import { recordOf } from '../raw-rows.js';
import { idempotencyTombstones, taskEvents, tasks } from '../schema.js';
import {
  findLiveTombstone,
  liveTombstoneStatement,
  type IdempotencyTombstone,
} from './retention.js';
import { firstStepOf, type TaskTypeManifest } from './task-types.js';

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
  const created = decideTransition(NO_TASK, { type: 'create' });
  if (!created.ok) throw new Error(`the transition table refuses create: ${created.reason}`);
  const status = created.to.status as TaskStatus;
  const inputHash = hashJson(task.input);
  const firstStep = firstStepOf(task.taskType);
  const create = createStatement(db, task, { status, inputHash, firstStep });
  const key = task.idempotencyKey;
  if (key === undefined) {
    // Nothing can conflict without a key: the one statement commits on its own (one round trip).
    const [row] = await db.execute(create);
    if (!row) throw new Error('the task insert returned no row');
    return { kind: 'created', task: recordOf(tasks, row) };
  }
  try {
    return await db.transaction(async (tx): Promise<SubmitTaskResult> => {
      // The key's tombstone is read after the insert, not before: an insert that waited for
      // retention deleting the key's holder sees that deletion's tombstone here, as it committed in
      // the same go. Both are raw statements, which take the same path through drizzle and
      // postgres.js, so they go out in this order and together (postgres.js pipelines a
      // transaction's statements on its connection): one round trip for both. (Statements of
      // different kinds — a builder, a raw one — need not go out in the order they were called.)
      const [created, tombstones] = await Promise.all([
        tx.execute(create),
        tx.execute(liveTombstoneStatement(task.tenantId, key)),
      ]);
      const row = created[0];
      if (!row) return existingRepeat(tx, task, inputHash);
      const tombstone = tombstones[0];
      if (tombstone) {
        // A key of a deleted task: thrown to roll the inserts back.
        const holder = recordOf(idempotencyTombstones, tombstone);
        throw new KeyOfDeletedTask(checkSameRequest(holder, task, inputHash));
      }
      return { kind: 'created', task: recordOf(tasks, row) };
    });
  } catch (error) {
    // Thrown to roll the insert back: the key belongs to a deleted task.
    if (error instanceof KeyOfDeletedTask) return { kind: 'deleted', tombstone: error.tombstone };
    throw error;
  }
}

/**
 * The task, its `create` event and its first step (ready, due now) in one statement (data-modifying
 * CTEs), returning the task row; with a key that already has a task, nothing is inserted and no row
 * returned. One statement where three took two round trips, and atomic without a transaction.
 */
function createStatement(
  db: Database,
  task: NewTask,
  facts: { status: TaskStatus; inputHash: string; firstStep: { name: string; resource: string } },
): SQL {
  const insertTask = db
    .insert(tasks)
    .values({
      tenantId: task.tenantId,
      type: task.taskType.name,
      typeVersion: task.taskType.version,
      priority: task.priority,
      input: task.input,
      inputHash: facts.inputHash,
      idempotencyKey: task.idempotencyKey ?? null,
      status: facts.status,
      currentStep: facts.firstStep.name,
      lastEventSeq: 1,
      traceId: task.traceId ?? null,
      traceParent: task.traceParent ?? null,
    })
    .onConflictDoNothing({
      target: [tasks.tenantId, tasks.idempotencyKey],
      where: sql`${tasks.idempotencyKey} is not null`,
    })
    .returning();
  const eventData = JSON.stringify({ priority: task.priority, type: task.taskType.name });
  return sql`
    with inserted as (${insertTask.getSQL()}),
    create_event as (
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select id, tenant_id, 1, 'create', null, status, current_step, ${eventData}::jsonb
      from inserted
    ),
    first_step as (
      insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input)
      select id, 1, current_step, ${facts.firstStep.resource}::text, tenant_id, priority, 'ready',
             input
      from inserted
    )
    select * from inserted`;
}

/** Rolls back a task insert whose idempotency key has a live tombstone. */
class KeyOfDeletedTask extends Error {
  constructor(readonly tombstone: IdempotencyTombstone) {
    super(`idempotency key of deleted task ${tombstone.taskId}`);
  }
}

async function existingRepeat(
  executor: Executor,
  task: NewTask,
  inputHash: string,
): Promise<SubmitTaskResult> {
  const key = task.idempotencyKey;
  if (key === undefined) throw new Error('insert of a task without idempotency key was skipped');
  const rows = await executor
    .select()
    .from(tasks)
    .where(and(eq(tasks.tenantId, task.tenantId), eq(tasks.idempotencyKey, key)));
  const existing = rows[0];
  if (existing) return { kind: 'existing', task: checkSameRequest(existing, task, inputHash) };
  // The holder the insert ran into was deleted since; retention wrote its tombstone in that commit.
  const tombstone = await findLiveTombstone(executor, task.tenantId, key);
  if (tombstone)
    return { kind: 'deleted', tombstone: checkSameRequest(tombstone, task, inputHash) };
  throw new Error(`idempotency key ${key} conflicted but no task holds it`);
}

/**
 * The earlier holder of the key (a task, or a deleted task's tombstone) when the repeat asks for
 * the same thing; otherwise the `already_exists` error every conflicting repeat gets.
 */
export function checkSameRequest<T extends KeyHolder>(
  holder: T,
  task: NewTask,
  inputHash: string,
): T {
  const same =
    holder.type === task.taskType.name &&
    holder.priority === task.priority &&
    holder.inputHash === inputHash;
  if (!same) {
    throw new SluiceError(
      'already_exists',
      `idempotency key "${task.idempotencyKey}" was used for task ${holderId(holder)} with a different type, priority or input`,
      { field: 'idempotency_key' },
    );
  }
  return holder;
}

/** What a task and a tombstone both tell about the request that took a key. */
export type KeyHolder = Pick<TaskRecord, 'type' | 'priority' | 'inputHash'> &
  ({ readonly id: string } | { readonly taskId: string });

function holderId(holder: KeyHolder): string {
  return 'taskId' in holder ? holder.taskId : holder.id;
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
  const rows = await executor
    .select()
    .from(tasks)
    .where(inArray(tasks.id, ids))
    .orderBy(asc(tasks.id))
    .for('update');
  return new Map(rows.map((row) => [row.id, row]));
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

/** SHA-256 of a JSON value in canonical form (object keys sorted), so key order does not matter. */
export function hashJson(value: Json): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: Json): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] ?? null)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a syntactically valid UUID (task ids); anything else cannot name a task. */
export function isUuid(value: string): boolean {
  return UUID.test(value);
}

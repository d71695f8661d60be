/**
 * Creating tasks of one tenant, all or none, in one statement (and with keys one transaction) for
 * the whole batch: `CreateTasks`, and `CreateTask` as a batch of one (`submitTask`).
 */
import { randomUUID } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import { NO_TASK, decideTransition, type TaskStatus } from '@sluice/core';
import type { Database, Executor, Transaction } from '../client.js';
import { rowsOf, transactionInOneWrite } from '../one-write.js';
import { recordOf } from '../raw-rows.js';
import { isRefusedOnPurpose } from '../refused.js';
import { idempotencyTombstones, tasks } from '../schema.js';
import { textArrayOf } from './batch-input.js';
import { StaleReads, rememberedReadsGuard, type RememberedReads } from './remembered-reads.js';
import { liveTombstonesStatement, type IdempotencyTombstone } from './retention.js';
import { checkSameRequest, hashJson } from './task-keys.js';
import type { NewTask, SubmitTaskResult } from './tasks.js';
import { firstStepOf } from './task-types.js';
import type { AdmissionSettings, ClaimedStep } from './claim.js';
import { claimUrgentSteps, urgentClaimStatements, urgentClaimedOf } from './urgent-claim.js';

/**
 * How often a batch is tried again after some of its keys turned out to belong to deleted tasks
 * (each try answers those entries from their tombstones and inserts the rest). Only a race with
 * retention deleting more of the batch's keys between two tries needs more than one.
 */
const MAX_TRIES = 3;

/** An entry of a batch with what the insert needs beyond the request. */
export interface BatchEntry {
  readonly index: number;
  readonly task: NewTask;
  /** Chosen here, so each returned row can be matched to its entry. */
  readonly id: string;
  readonly inputHash: string;
}

/**
 * Records every task of `batch` (one tenant's) with its `create` event and its first step (ready,
 * due now), atomically: either each entry gets its result, in the order given, or nothing is
 * written. With an idempotency key, a repeat of the same request answers `existing` (or `deleted`,
 * from the key's tombstone while it lives), a different request under a used key throws
 * `already_exists` for the whole batch.
 *
 * The caller refuses batches that repeat a key; two entries with one key throw here.
 */
export async function submitTasks(
  db: Database,
  batch: readonly NewTask[],
): Promise<SubmitTaskResult[]> {
  return (await submitTasksClaiming(db, batch, undefined)).results;
}

/** How a create claims its P0 steps (see urgent-claim.ts). */
export interface UrgentClaim {
  /** The admission of the claim (the governor's decision applied); lower priorities are held. */
  readonly admission: AdmissionSettings;
}

/** What {@link submitTasksClaiming} did: each entry's result, and the P0 steps it claimed. */
export interface SubmittedTasks {
  readonly results: SubmitTaskResult[];
  /** Dispatched in the create's transaction: the caller publishes them (see `claimUrgentSteps`). */
  readonly claimed: ClaimedStep[];
}

/**
 * {@link submitTasks}; with `urgent`, the create also claims, in its transaction, up to as many
 * ready P0 steps as it created P0 tasks, in their first steps' resources (`claimUrgentSteps`).
 * With `remembered`, the batch was checked against API keys and task types the caller remembers
 * rather than read for it: the insert confirms them (`rememberedReadsGuard`), and when one changed
 * nothing is written and this throws {@link StaleReads}.
 */
export async function submitTasksClaiming(
  db: Database,
  batch: readonly NewTask[],
  urgent: UrgentClaim | undefined,
  remembered?: RememberedReads,
): Promise<SubmittedTasks> {
  try {
    return await submitChecked(db, batch, urgent, remembered);
  } catch (error) {
    // Only the guard raises this refusal where it reaches here (the one-write check's is answered
    // inside insertInOneWrite), and a statement that raised it wrote nothing.
    if (remembered && isRefusedOnPurpose(error)) throw new StaleReads();
    throw error;
  }
}

async function submitChecked(
  db: Database,
  batch: readonly NewTask[],
  urgent: UrgentClaim | undefined,
  remembered: RememberedReads | undefined,
): Promise<SubmittedTasks> {
  const status = createdStatus();
  const entries = batch.map((task, index): BatchEntry => ({
    index,
    task,
    id: randomUUID(),
    inputHash: hashJson(task.input),
  }));
  const tenantId = checkOneTenant(batch);
  const keys = checkUniqueKeys(batch);
  if (tenantId === undefined) return { results: [], claimed: [] };
  const insert = (pending: readonly BatchEntry[]) =>
    insertStatement(tenantId, pending, status, remembered);
  /** Claims the P0 steps of the entries this transaction created (none without `urgent`). */
  const claimUrgent = (tx: Transaction, results: readonly SubmitTaskResult[]) => {
    if (!urgent) return Promise.resolve([]);
    const created = entries.filter((entry) => results[entry.index]?.kind === 'created');
    const resources = firstResourcesOfUrgent(created);
    return claimUrgentSteps(tx, resources, resources.length, urgent.admission);
  };
  const urgentResources = urgent ? firstResourcesOfUrgent(entries) : [];
  if (keys.length === 0 && urgentResources.length === 0) {
    // Nothing can conflict without keys: the one statement commits on its own (one round trip).
    const rows = await db.execute(insert(entries));
    return { results: answer(entries, new Map(), rowsById(rows)), claimed: [] };
  }
  // The usual create with keys (every key new) or with P0 work: one round trip. Otherwise (a key
  // is held or belongs to a deleted task), the transaction below.
  const claim = urgent
    ? urgentClaimStatements(urgentResources, urgentResources.length, urgent.admission)
    : [];
  const written = await insertInOneWrite(db, tenantId, entries, insert(entries), claim);
  if (written !== undefined) {
    return { results: answer(entries, new Map(), written.rows), claimed: written.claimed };
  }
  // Entries whose key belongs to a task retention deleted: answered from the tombstone, not
  // inserted (an insert of them would succeed, the key being free again).
  const answered = new Map<number, SubmitTaskResult>();
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction(async (tx) => {
        const results = await insertWithKeys(tx, tenantId, entries, insert, answered);
        return { results, claimed: await claimUrgent(tx, results) };
      });
    } catch (error) {
      if (!(error instanceof KeysOfDeletedTasks) || attempt === MAX_TRIES) throw error;
      for (const [index, result] of error.results) answered.set(index, result);
      // Nothing left to insert (a lone create of a deleted task's key): no second transaction.
      if (answered.size === entries.length) {
        return { results: answer(entries, answered, new Map()), claimed: [] };
      }
    }
  }
}

/** The status a created task starts in, as the transition table says. */
export function createdStatus(): TaskStatus {
  const created = decideTransition(NO_TASK, { type: 'create' });
  if (!created.ok) throw new Error(`the transition table refuses create: ${created.reason}`);
  return created.to.status as TaskStatus;
}

/**
 * A batch in one round trip, when every key is new: the insert, a check when it has keys, and the
 * urgent claim's statements (`claim`, none without P0 work) go out with `begin` and `commit` in one
 * write (`transactionInOneWrite`). The check (a later statement than the insert, so it sees what a
 * retention that the insert waited for committed, as in {@link insertWithKeys}) refuses to let the
 * transaction commit unless every entry was inserted and no key has a live tombstone: its error
 * makes the `COMMIT` a rollback. The claim sees the inserted rows, as in the transaction. Answers
 * the inserted rows by id and the claimed steps, or undefined when refused: nothing was written,
 * and the caller takes {@link insertWithKeys}, which answers held keys and deleted tasks.
 */
async function insertInOneWrite(
  db: Database,
  tenantId: string,
  entries: readonly BatchEntry[],
  insertOfEntries: SQL,
  claim: readonly SQL[],
): Promise<{ rows: Map<string, Record<string, unknown>>; claimed: ClaimedStep[] } | undefined> {
  const keys = entries.flatMap(({ task }) => task.idempotencyKey ?? []);
  const checks =
    keys.length === 0
      ? []
      : [
          keyedBatchCheck(
            tenantId,
            entries.map((entry) => entry.id),
            keys,
          ),
        ];
  const [inserted, ...after] = await transactionInOneWrite(db, [
    insertOfEntries,
    ...checks,
    ...claim,
  ]);
  // First the insert's own error (a refusal of remembered reads, say): the statements after it
  // fail only because it did.
  const rows = rowsOf(inserted);
  const checked = checks.length > 0 ? after.shift() : undefined;
  if (checked?.status === 'rejected') {
    if (isRefusedOnPurpose(checked.reason)) return undefined;
    throw checked.reason;
  }
  const claimed = claim.length > 0 ? urgentClaimedOf(rowsOf(after[after.length - 1])) : [];
  return { rows: rowsById(rows), claimed };
}

/**
 * The one-write create's check (see {@link insertInOneWrite}): refuses the commit unless each
 * of `ids` is a task of the tenant and none of `keys` has a live tombstone (the definition the
 * transaction's tombstone read uses too).
 *
 * Each id is looked up on its own, by a correlated subquery (which Postgres runs per id and does
 * not turn into a join). Written as `tenant_id = … and id = any(…)`, the check was planned as a walk
 * through all of the tenant's tasks in `tasks_tenant_created_idx`, filtered by id, whenever the
 * statistics did not know the tenant to be large (a table analyzed while it was empty, a tenant
 * that grew since the last analysis): thousands of rows per create batch in a benchmark's enqueue
 * (auto_explain), because the planner costs an id list's key lookups as random reads.
 */
export function keyedBatchCheck(
  tenantId: string,
  ids: readonly string[],
  keys: readonly string[],
): SQL {
  return sql`
    select sluice_refuse_commit('a key is held or belongs to a deleted task')
    where (select count(*) from unnest(${textArrayOf(ids)}::uuid[]) as entry(id)
           where (select t.tenant_id from tasks t where t.id = entry.id) = ${tenantId})
          <> ${ids.length}
       or exists (${liveTombstonesStatement(tenantId, keys)})`;
}

/**
 * One try of a batch with keys, in a transaction. The keys' tombstones are read after the insert,
 * not before: an insert that waited for retention deleting a key's holder sees the tombstone that
 * deletion wrote, as it committed in the same go. Both are raw statements, which take the same
 * path through drizzle and postgres.js, so they go out in this order and together (postgres.js
 * pipelines a transaction's statements on its connection): one round trip for both. (Statements of
 * different kinds — a builder, a raw one — need not go out in the order they were called.)
 */
async function insertWithKeys(
  tx: Executor,
  tenantId: string,
  entries: readonly BatchEntry[],
  insert: (pending: readonly BatchEntry[]) => SQL,
  answered: ReadonlyMap<number, SubmitTaskResult>,
): Promise<SubmitTaskResult[]> {
  const pending = entries.filter((entry) => !answered.has(entry.index));
  const pendingKeys = pending.flatMap(({ task }) => task.idempotencyKey ?? []);
  const [inserted, tombstoneRows] = await Promise.all([
    tx.execute(insert(pending)),
    tx.execute(liveTombstonesStatement(tenantId, pendingKeys)),
  ]);
  const rows = rowsById(inserted);
  const tombstones = new Map<string, IdempotencyTombstone>();
  for (const raw of tombstoneRows) {
    const tombstone = recordOf(idempotencyTombstones, raw);
    tombstones.set(tombstone.idempotencyKey, tombstone);
  }

  // An inserted entry whose key has a live tombstone repeats a deleted task: roll back, answer it
  // from the tombstone and try the rest again.
  const ofDeleted = new Map<number, SubmitTaskResult>();
  for (const entry of pending) {
    const key = entry.task.idempotencyKey;
    const tombstone = key === undefined ? undefined : tombstones.get(key);
    if (rows.has(entry.id) && tombstone) {
      const holder = checkSameRequest(tombstone, entry.task, entry.inputHash);
      ofDeleted.set(entry.index, { kind: 'deleted', tombstone: holder });
    }
  }
  if (ofDeleted.size > 0) throw new KeysOfDeletedTasks(ofDeleted);

  // Entries that were not inserted ran into a key that already has a holder.
  const conflicted = pending.filter((entry) => !rows.has(entry.id));
  const holders = await keyHolders(
    tx,
    tenantId,
    conflicted.flatMap(({ task }) => task.idempotencyKey ?? []),
  );
  const repeats = new Map<number, SubmitTaskResult>(answered);
  for (const entry of conflicted) {
    const key = entry.task.idempotencyKey;
    if (key === undefined) throw new Error('insert of a task without idempotency key was skipped');
    const holder = holders.get(key);
    if (holder) {
      repeats.set(entry.index, {
        kind: 'existing',
        task: checkSameRequest(holder, entry.task, entry.inputHash),
      });
      continue;
    }
    // The holder the insert ran into was deleted since; retention wrote its tombstone in that
    // commit, which the tombstone read (a later statement) sees.
    const tombstone = tombstones.get(key);
    if (!tombstone) throw new Error(`idempotency key ${key} conflicted but no task holds it`);
    repeats.set(entry.index, {
      kind: 'deleted',
      tombstone: checkSameRequest(tombstone, entry.task, entry.inputHash),
    });
  }
  return answer(entries, repeats, rows);
}

/** Every entry's result, in the order of the batch. */
function answer(
  entries: readonly BatchEntry[],
  repeats: ReadonlyMap<number, SubmitTaskResult>,
  rows: ReadonlyMap<string, Record<string, unknown>>,
): SubmitTaskResult[] {
  return entries.map((entry) => {
    const repeat = repeats.get(entry.index);
    if (repeat) return repeat;
    const row = rows.get(entry.id);
    if (!row) throw new Error(`the batch insert returned no row for entry ${entry.index}`);
    return { kind: 'created', task: recordOf(tasks, row) };
  });
}

/**
 * The tasks, their `create` events and first steps in one statement (data-modifying CTEs, the
 * rows as one JSON parameter), returning the inserted task rows; an entry whose key already has a
 * task is skipped. Keyed rows go in key order, so two batches that share keys wait for each other
 * in the same order instead of deadlocking. With `remembered`, the rows depend on its guard, so the
 * statement fails before it writes anything when what the batch was checked with changed.
 */
export function insertStatement(
  tenantId: string,
  entries: readonly BatchEntry[],
  status: TaskStatus,
  remembered: RememberedReads | undefined,
): SQL {
  const rows = entries.map(({ task, id, inputHash }) => {
    const firstStep = firstStepOf(task.taskType);
    return {
      id,
      type: task.taskType.name,
      type_version: task.taskType.version,
      priority: task.priority,
      input: task.input,
      input_hash: inputHash,
      idempotency_key: task.idempotencyKey ?? null,
      current_step: firstStep.name,
      resource: firstStep.resource,
      trace_id: task.traceId ?? null,
      trace_parent: task.traceParent ?? null,
    };
  });
  // Without a guard the statement's text stays the same, and so does its prepared plan.
  const guard = remembered
    ? sql`guard as materialized (${rememberedReadsGuard(tenantId, remembered)}),`
    : sql``;
  const guarded = remembered ? sql`where not exists (select 1 from guard)` : sql``;
  return sql`
    with ${guard} input as (
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) as i(
        id uuid, type text, type_version integer, priority smallint, input jsonb,
        input_hash text, idempotency_key text, current_step text, resource text, trace_id text,
        trace_parent text)
      ${guarded}
    ),
    inserted as (
      insert into tasks (id, tenant_id, type, type_version, priority, input, input_hash,
                         idempotency_key, status, current_step, last_event_seq, trace_id,
                         trace_parent)
      select id, ${tenantId}, type, type_version, priority, input, input_hash, idempotency_key,
             ${status}, current_step, 1, trace_id, trace_parent
      from input
      order by idempotency_key nulls last
      on conflict (tenant_id, idempotency_key) where idempotency_key is not null do nothing
      returning *
    ),
    create_event as (
      insert into task_events (task_id, tenant_id, seq, type, from_status, to_status, step, data)
      select id, tenant_id, 1, 'create', null, status, current_step,
             jsonb_build_object('priority', priority, 'type', type)
      from inserted
      returning id
    ),
    outboxed as (insert into task_event_outbox (event_id) select id from create_event),
    first_step as (
      insert into task_steps (task_id, seq, name, resource, tenant_id, priority, status, input)
      select inserted.id, 1, inserted.current_step, input.resource, inserted.tenant_id,
             inserted.priority, 'ready', inserted.input
      from inserted join input on input.id = inserted.id
    )
    select * from inserted`;
}

/** The tasks holding `keys`, by key. */
async function keyHolders(
  tx: Executor,
  tenantId: string,
  keys: readonly string[],
): Promise<Map<string, typeof tasks.$inferSelect>> {
  const holders = new Map<string, typeof tasks.$inferSelect>();
  if (keys.length === 0) return holders;
  const rows = await tx.execute(sql`
    select * from tasks
    where tenant_id = ${tenantId} and idempotency_key = any(${textArrayOf(keys)})`);
  for (const raw of rows) {
    const task = recordOf(tasks, raw);
    if (task.idempotencyKey !== null) holders.set(task.idempotencyKey, task);
  }
  return holders;
}

/**
 * The resource of the first step of each P0 entry (one per entry, repeats kept): what the urgent
 * claim of a create that inserted these entries may claim in, and how many.
 */
function firstResourcesOfUrgent(entries: readonly BatchEntry[]): string[] {
  return entries.flatMap(({ task }) =>
    task.priority === 0 ? [firstStepOf(task.taskType).resource] : [],
  );
}

function rowsById(rows: Iterable<Record<string, unknown>>): Map<string, Record<string, unknown>> {
  const byId = new Map<string, Record<string, unknown>>();
  for (const row of rows) byId.set(String(row['id']), row);
  return byId;
}

function checkOneTenant(batch: readonly NewTask[]): string | undefined {
  const tenantId = batch[0]?.tenantId;
  if (batch.some((task) => task.tenantId !== tenantId)) {
    throw new Error('a batch of tasks belongs to one tenant');
  }
  return tenantId;
}

function checkUniqueKeys(batch: readonly NewTask[]): string[] {
  const keys = batch.flatMap((task) => task.idempotencyKey ?? []);
  if (new Set(keys).size !== keys.length) {
    throw new Error('a batch of tasks repeats an idempotency key');
  }
  return keys;
}

/** Rolls a try back: some of its inserted entries repeat deleted tasks (by their keys). */
class KeysOfDeletedTasks extends Error {
  constructor(readonly results: ReadonlyMap<number, SubmitTaskResult>) {
    super(`${results.size} idempotency keys of deleted tasks`);
  }
}

/**
 * A create's statements run once on each connection of the gateway's pool before it serves, in
 * transactions that cannot commit, so that no caller's create is a connection's first.
 *
 * A connection's first create cost 14–30 ms of write against 5–7 for the next ones on an idle
 * machine (session 39, idle pickup: the first measured creates after a gateway started, one for
 * each of its ten connections). Preparing the statements alone (a parse and describe) did not
 * help: most of it is the Postgres backend doing things for the first time — the foreign-key
 * checks' own plans, the `task_events` trigger and `sluice_refuse_commit` compiled, the tables'
 * indexes and the functions the statements call looked up — which only running the statements
 * does. With this warm-up the first ten measured `CreateTask`s took 15–16 ms (median, three runs)
 * against 20–27 without; the rest 10–11 either way. The statements are built as a create builds
 * them, so the ones prepared here are the ones a create runs (postgres.js keys a prepared statement
 * by its text and its parameters' types).
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { Database } from '../client.js';
import { rowsOf, transactionInOneWrite } from '../one-write.js';
import { isRefusedOnPurpose } from '../refused.js';
import { publishSeqsStatement } from './publication.js';
import { createdStatus, insertStatement, keyedBatchCheck, type BatchEntry } from './task-batch.js';
import { latestTaskTypesStatement, type TaskTypeManifest } from './task-types.js';
import { keyOwnersStatement } from './tenants.js';

/** A type no task has: the warm-up's task is never committed, so nothing runs it. */
const WARM_UP_TYPE: TaskTypeManifest = {
  name: 'sluice.warm-up',
  version: 1,
  description: 'rolled back at once; never runs',
  inputSchema: {},
  firstStep: 'warm-up',
  steps: [{ name: 'warm-up', resource: 'warm-up', timeoutMs: 1_000, maxAttempts: 1 }],
};

/**
 * Runs a create's statements on up to `connections` connections of `db`'s pool at once (so each
 * has a connection of its own), each as a transaction in one write that cannot commit: the reads
 * of a key and a type, a tenant made for it, the insert of a task, the keyed create's check, the
 * record of a published step (of no step), the insert of a create on remembered reads (refused by
 * its guard: the key does not exist), and last a statement that refuses the commit whatever came
 * before it. Nothing is left behind; sequences move on. A connection the pool opens later (after a
 * reconnect) pays for its first create, as before.
 *
 * @throws the first error of a statement meant to succeed (a database the gateway cannot write).
 */
export async function prepareCreates(db: Database, connections: number): Promise<void> {
  await Promise.all(Array.from({ length: connections }, () => runOneCreate(db)));
}

async function runOneCreate(db: Database): Promise<void> {
  const tenantId = `sluice-warm-up-${randomUUID()}`;
  const key = 'warm-up';
  const status = createdStatus();
  const entry: BatchEntry = {
    index: 0,
    id: randomUUID(),
    inputHash: '',
    task: { tenantId, taskType: WARM_UP_TYPE, priority: 2, input: {}, idempotencyKey: key },
  };
  const meantToSucceed = [
    keyOwnersStatement([key]),
    latestTaskTypesStatement([WARM_UP_TYPE.name]),
    sql`insert into tenants (id, name) values (${tenantId}, ${tenantId})`,
    insertStatement(tenantId, [entry], status, undefined),
    keyedBatchCheck(tenantId, [entry.id], [key]),
    publishSeqsStatement([{ stepId: 0, dispatch: 0, publishSeq: 0 }]),
  ];
  const outcomes = await transactionInOneWrite(db, [
    ...meantToSucceed,
    insertStatement(tenantId, [{ ...entry, id: randomUUID() }], status, {
      keyHashes: [key],
      types: [{ name: WARM_UP_TYPE.name, version: 1, registeredStamp: '2000-01-01 00:00:00+00' }],
    }),
    sql`select sluice_refuse_commit('the warm-up of a connection never commits')`,
  ]);
  // Each statement meant to succeed did, or its error is thrown.
  for (const outcome of outcomes.slice(0, meantToSucceed.length)) rowsOf(outcome);
  // The guard refuses (no such key), which aborts the transaction; had it let its insert through,
  // the last statement refuses the commit.
  const [guarded, last] = outcomes.slice(meantToSucceed.length);
  const refusal: unknown =
    guarded?.status === 'rejected'
      ? guarded.reason
      : last?.status === 'rejected'
        ? last.reason
        : undefined;
  if (isRefusedOnPurpose(refusal)) return;
  throw new Error('the warm-up of a connection was not refused its commit as it should be', {
    cause: refusal,
  });
}

/**
 * Recording the JetStream sequence of published dispatches against a real Postgres: stored for
 * the dispatch it was published under, never over a sequence already stored or for a later
 * dispatch, and found by key however many steps the table holds.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import type { DatabaseHandle } from '../client.js';
import {
  createQueuedTasks,
  oneStepManifest,
  openTaskTypeDatabase,
  type TaskTypeDatabase,
} from '../testing/index.js';
import { explainAnalyze } from './explain.js';
import { publishSeqsStatement, recordPublishSeqs, type PublishedDispatch } from './publication.js';

const manifest = oneStepManifest();

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest], max: 4 });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** Creates `count` one-step tasks whose steps were dispatched once; returns the step ids. */
async function dispatchedSteps(count: number): Promise<number[]> {
  const taskIds = await createQueuedTasks(handle.db, 'acme', manifest, count);
  const rows = await handle.sql<{ id: string }[]>`
    update task_steps set status = 'dispatched', dispatch_count = 1, dispatched_at = now()
    where task_id = any(${taskIds}::uuid[])
    returning id`;
  return rows.map((row) => Number(row.id)).sort((a, b) => a - b);
}

async function publishSeqOf(stepId: number): Promise<number | null> {
  const [row] = await handle.sql<{ publish_seq: string | null }[]>`
    select publish_seq from task_steps where id = ${stepId}`;
  return row?.publish_seq == null ? null : Number(row.publish_seq);
}

describe('recordPublishSeqs', () => {
  it('stores the sequence of the dispatch published, not over a stored one or a later dispatch', async () => {
    const [fresh, started, redispatched] = (await dispatchedSteps(3)) as [number, number, number];
    // A start stored the sequence of the message it came in first; a later dispatch of the third.
    await handle.db.execute(sql`update task_steps set publish_seq = 5 where id = ${started}`);
    await handle.db.execute(sql`
      update task_steps set dispatch_count = 2 where id = ${redispatched}`);
    await recordPublishSeqs(handle.db, [
      { stepId: fresh, dispatch: 1, publishSeq: 11 },
      { stepId: started, dispatch: 1, publishSeq: 12 },
      { stepId: redispatched, dispatch: 1, publishSeq: 13 },
    ]);
    assert.deepEqual(
      [await publishSeqOf(fresh), await publishSeqOf(started), await publishSeqOf(redispatched)],
      [11, 5, null],
    );
  });

  it('finds the published steps by key, not by reading the table', async () => {
    // Finished steps with their sequences, and a batch of 150 dispatched ones: joined to the
    // values alone, the planner read all of them (a sequential scan and a hash join).
    const finished = await dispatchedSteps(6_000);
    await handle.db.execute(sql`
      update task_steps set status = 'succeeded', publish_seq = id
      where id <= ${finished[finished.length - 1]}`);
    const batch = await dispatchedSteps(150);
    await handle.sql`analyze task_steps`;
    const published: PublishedDispatch[] = batch.map((stepId, n) => ({
      stepId,
      dispatch: 1,
      publishSeq: 100_000 + n,
    }));
    const plan = (await explainAnalyze(handle.db, publishSeqsStatement(published))).join('\n');
    assert.doesNotMatch(plan, /Seq Scan on task_steps/);
    assert.match(plan, /Index Scan using task_steps_pkey on task_steps s_1 .*rows=150 loops=1\)/);
  });
});

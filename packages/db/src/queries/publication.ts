/**
 * What the dispatcher writes after it published a claim's steps: the stream sequence of each
 * dispatch JetStream stored (for the reconciler), and the claims whose publication failed, put back
 * into the ready queue.
 */
import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { taskSteps } from '../schema.js';
import { idList } from './batch-input.js';

/** A dispatch of a step that JetStream stored, under its stream sequence. */
export interface PublishedDispatch {
  readonly stepId: number;
  /** The step's `dispatch_count` when it was claimed: a later dispatch is not this one. */
  readonly dispatch: number;
  readonly publishSeq: number;
}

/**
 * Stores the JetStream sequence of each published dispatch (for the reconciler), where no start
 * stored it first (a start records the sequence of the message it came in; see
 * {@link StepDispatchRef.publishSeq}).
 *
 * A step row locked by someone else is skipped, not waited for: it is being started (the start
 * stores the sequence itself), finished, or put back. Waiting was a deadlock: an executor's group
 * start takes several step rows, this statement many, in orders of their own, and Postgres broke
 * the cycle only after `deadlock_timeout` (1 s), which showed as a one-second tail in the wait of
 * high-priority steps under a backlog.
 */
export async function recordPublishSeqs(
  executor: Executor,
  published: readonly PublishedDispatch[],
): Promise<void> {
  if (published.length === 0) return;
  await executor.execute(publishSeqsStatement(published));
}

/** The statement of {@link recordPublishSeqs}, for a non-empty `published`. */
export function publishSeqsStatement(published: readonly PublishedDispatch[]): SQL {
  const values = published.map((p) => ({
    id: p.stepId,
    dispatch: p.dispatch,
    publish_seq: p.publishSeq,
  }));
  // The steps are found by their ids as a parameter list (`idList`). Joined to the values alone,
  // they were read by a sequential scan of the whole table, finished steps included, and a hash
  // join: the planner's choice for a batch of 150 in a table of 6,000 rows (it costs 150 key
  // lookups as random reads), seen in drains too, and a cost that grows with the history.
  return sql`
    with v as (
      select * from jsonb_to_recordset(${JSON.stringify(values)}::jsonb)
        as v(id bigint, dispatch int, publish_seq bigint)
    ),
    waiting as (
      select s.id, v.publish_seq
      from task_steps s join v on s.id = v.id and s.dispatch_count = v.dispatch
      where s.id in ${idList(published.map((p) => p.stepId))} and s.publish_seq is null
      order by s.id
      for update of s skip locked
    )
    update task_steps s set publish_seq = waiting.publish_seq
    from waiting
    where s.id = waiting.id
  `;
}

/** Puts claimed steps whose publication failed back into the ready queue. */
export async function releaseClaims(
  executor: Executor,
  claims: ReadonlyArray<{ stepId: number; dispatch: number }>,
): Promise<void> {
  for (const claim of claims) {
    await executor
      .update(taskSteps)
      .set({ status: 'ready' })
      .where(
        and(
          eq(taskSteps.id, claim.stepId),
          eq(taskSteps.dispatchCount, claim.dispatch),
          eq(taskSteps.status, 'dispatched'),
        ),
      );
  }
}

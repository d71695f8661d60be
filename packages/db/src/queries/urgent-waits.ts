/**
 * What the scheduler's urgent-wait guard reads: how long P0 steps took from dispatch to start, and
 * how many steps each resource has in flight (what its cap is set from when P0 waits too long).
 */
import { sql } from 'drizzle-orm';
import type { Executor } from '../client.js';
import { latestStepActivity } from './step-activity.js';

/**
 * One P0 step's wait from its dispatch (the claim transaction's start) to its start (the start
 * transaction's): the part of its wait that only the work ahead of it in the pipeline lengthens.
 * Before its dispatch a step may also wait for reasons of its own — its tenant's cap, a hold, an
 * open breaker, a limit full of P0 work — which capping other priorities would not shorten.
 */
export interface UrgentWait {
  readonly resource: string;
  readonly waitMs: number;
}

/** Steps in flight in one resource: P0, and P1–P3. */
export interface InFlightByUrgency {
  readonly urgent: number;
  readonly lower: number;
}

/** One reading (see {@link readUrgentWaits}). */
export interface UrgentWaitReading {
  /** The waits of the P0 steps started after the previous reading's cursor. */
  readonly waits: readonly UrgentWait[];
  /** Steps dispatched or running, by resource (a resource with none is left out). */
  readonly inFlight: Readonly<Record<string, InFlightByUrgency>>;
  /**
   * Where the next reading starts: the latest start seen, in Postgres's clock and precision (so no
   * start is counted twice and no clock but the database's is compared).
   */
  readonly cursor: string;
}

/**
 * Reads the P0 starts since `cursor` (without one: of the last `firstWindowMs`) and the steps in
 * flight. Two index range reads: P0 steps active lately, steps in flight.
 */
export async function readUrgentWaits(
  executor: Executor,
  cursor: string | undefined,
  firstWindowMs: number,
): Promise<UrgentWaitReading> {
  const since =
    cursor === undefined
      ? sql`now() - make_interval(secs => ${firstWindowMs / 1_000})`
      : sql`${cursor}::timestamptz`;
  const [row] = await executor.execute<{
    waits: UrgentWait[];
    in_flight: Record<string, InFlightByUrgency>;
    cursor: string;
  }>(sql`
    with since as (select ${since} as at),
    started as (
      select s.resource, extract(epoch from s.started_at - s.dispatched_at)::float8 * 1000 as wait_ms,
        s.started_at
      from task_steps s, since
      where s.priority = 0
        -- A range of the activity index: a step started since then was active since then.
        and ${latestStepActivity('s')} > since.at
        and s.started_at > since.at
    ),
    in_flight as (
      select s.resource, (count(*) filter (where s.priority = 0))::int as urgent,
        (count(*) filter (where s.priority > 0))::int as lower
      from task_steps s
      where s.status in ('dispatched', 'running')
      group by s.resource
    )
    select
      coalesce((select jsonb_agg(jsonb_build_object('resource', resource, 'waitMs', wait_ms))
                from started), '[]'::jsonb) as waits,
      coalesce((select jsonb_object_agg(resource,
                  jsonb_build_object('urgent', urgent, 'lower', lower))
                from in_flight), '{}'::jsonb) as in_flight,
      coalesce((select max(started_at) from started), (select at from since))::text as cursor
  `);
  if (row === undefined) throw new Error('the urgent-wait reading returned no row');
  return { waits: row.waits, inFlight: row.in_flight, cursor: row.cursor };
}

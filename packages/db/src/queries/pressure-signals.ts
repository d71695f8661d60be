/**
 * The pressure signals the governor reads from Postgres every tick (ARCHITECTURE.md, backpressure):
 * queue depth, wait and run latency per priority, the retry share and connection usage. Read-only,
 * and cheap enough to run every second: each reads only the rows one of `task_steps`' partial or
 * activity indexes points at — the queue, the steps in flight, the steps active in the window —
 * never the finished history.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Priority } from '@sluice/core';
import type { Executor } from '../client.js';
import { latestStepActivity } from './step-activity.js';

/**
 * The index-usable bound of the windowed queries: steps of any priority whose latest activity
 * (dispatch, start or finish) is in the window, a range of `task_steps_activity_idx`. Every step
 * that started or finished in the window is among them, however long ago it was dispatched; a
 * step only dispatched in the window is read and left out by the queries' own conditions.
 */
function activeSince(since: SQL): SQL {
  return sql`priority in (0, 1, 2, 3)
    and ${latestStepActivity()} > ${since}`;
}

/** The start of the window, by the database's clock (the rows' timestamps are by it too). */
function windowStart(windowMs: number): SQL {
  return sql`now() - make_interval(secs => ${windowMs / 1_000})`;
}

/**
 * The statements behind the step signals, for `EXPLAIN` in tests and benchmarks: due ready steps
 * by resource and priority, in-flight steps by resource, and (over `windowMs`) latencies and retries.
 */
export function signalStatements(windowMs: number): {
  readyDepths: SQL;
  inFlightDepths: SQL;
  latencies: SQL;
  retries: SQL;
} {
  const since = windowStart(windowMs);
  return {
    readyDepths: sql`
      select resource, priority, count(*)::int as ready
      from task_steps
      where status = 'ready' and due_at <= now()
      group by resource, priority
      order by resource, priority
    `,
    inFlightDepths: sql`
      select resource, count(*)::int as in_flight
      from task_steps
      where status in ('dispatched', 'running')
      group by resource
      order by resource
    `,
    latencies: sql`
      select priority,
        percentile_cont(0.95) within group (order by wait_ms) filter (where waited) as wait_p95,
        percentile_cont(0.95) within group (order by run_ms) filter (where ran) as run_p95,
        (count(*) filter (where waited))::int as started,
        (count(*) filter (where ran))::int as finished
      from (
        select priority,
          (extract(epoch from started_at - due_at) * 1000)::float8 as wait_ms,
          (extract(epoch from finished_at - started_at) * 1000)::float8 as run_ms,
          coalesce(started_at > ${since} and started_at >= due_at, false) as waited,
          coalesce(finished_at > ${since} and finished_at >= started_at, false) as ran
        from task_steps
        where ${activeSince(since)} and started_at is not null
      ) s
      where waited or ran
      group by priority
      order by priority
    `,
    retries: sql`
      select count(*)::int as started, (count(*) filter (where attempts > 1))::int as retries
      from task_steps
      where ${activeSince(since)} and started_at > ${since}
    `,
  };
}

/** Due ready steps of one resource and priority. */
export interface ReadyDepth {
  readonly resource: string;
  readonly priority: Priority;
  readonly ready: number;
}

/** Steps of one resource dispatched or running. */
export interface InFlightDepth {
  readonly resource: string;
  readonly inFlight: number;
}

export interface QueueDepths {
  readonly ready: readonly ReadyDepth[];
  readonly inFlight: readonly InFlightDepth[];
}

/**
 * Ready steps that are due now, by resource and priority (steps waiting for a retry's due time are
 * not queue pressure), and steps in flight (dispatched or running) by resource. Only groups with
 * steps are returned, ordered by resource (and priority).
 */
export async function queueDepths(executor: Executor): Promise<QueueDepths> {
  const statements = signalStatements(0);
  const ready = await executor.execute<{ resource: string; priority: number; ready: number }>(
    statements.readyDepths,
  );
  const inFlight = await executor.execute<{ resource: string; in_flight: number }>(
    statements.inFlightDepths,
  );
  return {
    ready: ready.map((row) => ({
      resource: row.resource,
      priority: row.priority as Priority,
      ready: row.ready,
    })),
    inFlight: inFlight.map((row) => ({ resource: row.resource, inFlight: row.in_flight })),
  };
}

/** Latency of one priority over a window. */
export interface StepLatency {
  readonly priority: Priority;
  /** p95 of `started_at − due_at` over the steps started in the window; `null` when none. */
  readonly waitP95Ms: number | null;
  /** p95 of `finished_at − started_at` over the steps finished in the window; `null` when none. */
  readonly runP95Ms: number | null;
  readonly started: number;
  readonly finished: number;
}

/**
 * Wait and run latency per priority over the last `windowMs`: how long steps that started in the
 * window waited since they became due (`due_at`: creation, a retry's backoff end, or a requeue),
 * and how long steps that finished in it ran. A step started and then rescheduled (a retry, a
 * requeue) has a `due_at` after its `started_at` and is left out of the wait sample until it starts
 * again. Only priorities with a started or finished step are returned, in priority order.
 */
export async function stepLatencies(executor: Executor, windowMs: number): Promise<StepLatency[]> {
  const rows = await executor.execute<{
    priority: number;
    wait_p95: number | null;
    run_p95: number | null;
    started: number;
    finished: number;
  }>(signalStatements(windowMs).latencies);

  return rows.map((row) => ({
    priority: row.priority as Priority,
    waitP95Ms: row.wait_p95 === null ? null : Number(row.wait_p95),
    runP95Ms: row.run_p95 === null ? null : Number(row.run_p95),
    started: row.started,
    finished: row.finished,
  }));
}

/** Steps started in a window, and how many of those starts were retries. */
export interface RetryShare {
  readonly started: number;
  /** Started steps whose attempt count is above 1 (a retry or a takeover after a lost executor). */
  readonly retries: number;
}

/** Among the steps started in the last `windowMs`, how many were on a second or later attempt. */
export async function retryShare(executor: Executor, windowMs: number): Promise<RetryShare> {
  const rows = await executor.execute<{ started: number; retries: number }>(
    signalStatements(windowMs).retries,
  );

  return { started: rows[0]?.started ?? 0, retries: rows[0]?.retries ?? 0 };
}

/** Postgres connections in use against the ones clients may open. */
export interface ConnectionUsage {
  /** Client backends connected to the whole server (every database and user), this one included. */
  readonly inUse: number;
  /**
   * `max_connections` minus the slots ordinary roles cannot take: `superuser_reserved_connections`
   * and, from Postgres 16, `reserved_connections`.
   */
  readonly max: number;
}

/**
 * Server-wide, because `max_connections` is: every database's clients (other services, other
 * deployments on the same server) take from the same slots. Background workers and replication
 * senders are not counted; they do not take client slots.
 */
export async function databaseConnectionUsage(executor: Executor): Promise<ConnectionUsage> {
  const rows = await executor.execute<{ in_use: number; max: number }>(sql`
    select
      (select count(*)::int from pg_stat_activity where backend_type = 'client backend') as in_use,
      (current_setting('max_connections')::int
        - current_setting('superuser_reserved_connections')::int
        - coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0)) as max
  `);
  const row = rows[0];
  if (!row) throw new Error('connection usage query returned no row');
  return { inUse: row.in_use, max: row.max };
}

/**
 * Configuration of the scheduler, from the environment.
 */
import { RETRY_BUDGET_ENV } from './retry-budget-config.js';
import {
  COMMON_ENV,
  durationVar,
  intVar,
  loadEnvConfig,
  ADMISSION_ENV,
  type EnvConfig,
} from '@sluice/runtime';

const DAY_MS = 86_400_000;

export const SCHEDULER_ENV = {
  ...COMMON_ENV,
  ...ADMISSION_ENV,
  ...RETRY_BUDGET_ENV,
  /** Steps claimed (and outcomes applied, events relayed) per transaction. */
  SLUICE_SCHEDULER_BATCH: intVar(200, 1, 5_000),
  /**
   * Longest pause between two looks at Postgres when no wake-up arrives (wake-ups are core NATS
   * messages and may be lost; this bounds the delay, and finds steps whose due time came).
   */
  SLUICE_SCHEDULER_POLL_MS: intVar(1_000, 10, 60_000),
  /**
   * Longest pause of a loop whose passes find nothing to do (batch-loop.ts): it looks twice as long
   * after each such pass, up to this; a pass with work, or a wake-up during one, brings it back to
   * the poll. Known work that falls due earlier (a backoff, a timer) is never waited past. 0: five
   * times `SLUICE_SCHEDULER_POLL_MS`; the poll itself turns the pacing off.
   */
  SLUICE_SCHEDULER_IDLE_POLL_MS: intVar(0, 0, 600_000),
  /**
   * The urgent-wait guard's target: while the 90th percentile of a resource's P0 waits from
   * dispatch to start is above this many ms, fewer P1–P3 steps are admitted there
   * (urgent-wait-guard.ts); 0 turns the guard off.
   */
  SLUICE_URGENT_WAIT_TARGET_MS: intVar(30, 0, 3_600_000),
  /**
   * The fewest P1–P3 steps in flight the urgent-wait guard leaves a resource it caps: 2 keeps lower
   * priorities moving beside any P0 work; 0 holds them while P0 waits longer than the target.
   */
  SLUICE_URGENT_WAIT_FLOOR: intVar(2, 0, 100_000),
  /**
   * How long the event relay lets events gather before its next batch while it is busy (events
   * arrived while its last batch ran, and that batch relayed more than one): under load, one
   * batch (a read, a mark, a commit) per this interval instead of one per committed event, and
   * events reach subscribers up to this much later. Otherwise it publishes at once, so a task's
   * events on a quiet system are not delayed. Steps are dispatched apart from it.
   */
  SLUICE_RELAY_GATHER_MS: intVar(10, 0, 1_000),
  /** Leader lease time-to-live of the event relay and of the reconciler. */
  SLUICE_LEASE_TTL_MS: intVar(5_000, 1_000, 300_000),
  /** Longest pause between two reconciler passes (lost steps are found within about this). */
  SLUICE_RECONCILE_INTERVAL_MS: intVar(5_000, 10, 600_000),
  /**
   * A claimed step with no recorded publication older than this was never published (the
   * scheduler died between claim and publish). Publication takes milliseconds; this is a margin.
   */
  SLUICE_DISPATCH_GRACE_MS: intVar(10_000, 10, 600_000),
  /**
   * A dispatched or running step with no heartbeat for this long shows no sign of life: JetStream's
   * ack wait (30 s) plus a margin, so JetStream redelivers first whenever it still can.
   */
  SLUICE_STEP_STALE_MS: intVar(45_000, 10, 3_600_000),
  /** Dispatches per step; a lost step dispatched this often already fails instead. */
  SLUICE_MAX_DISPATCHES: intVar(10, 1, 1_000),
  /**
   * Retention: tasks in a final state are deleted (with their steps, events and timers) once they
   * finished this long ago (`7d`, `36h`, …). A task with a dead letter not yet redriven is kept
   * until the letter is purged.
   */
  SLUICE_RETENTION_AGE: durationVar('7d', 60_000, 3_650 * DAY_MS),
  /**
   * How long a deleted task's idempotency key stays taken (its tombstone), counted from the
   * deletion: a repeat within it gets the original task id instead of a new task.
   */
  SLUICE_TOMBSTONE_TTL: durationVar('30d', 60_000, 3_650 * DAY_MS),
  /** Tasks (and expired tombstones) deleted per retention transaction; 0 turns retention off. */
  SLUICE_RETENTION_BATCH: intVar(500, 0, 10_000),
  /** Pause between retention passes once nothing old enough is left. */
  SLUICE_RETENTION_INTERVAL_MS: intVar(60_000, 10, 86_400_000),
  /**
   * How often the queue tables' planner statistics are checked against their growth (and the
   * tables that doubled analyzed, see table-statistics.ts); 0 leaves them to autovacuum alone.
   */
  SLUICE_STATISTICS_CHECK_MS: intVar(5_000, 0, 3_600_000),
};

export type SchedulerConfig = EnvConfig<typeof SCHEDULER_ENV>;

export function loadSchedulerConfig(
  env: Record<string, string | undefined> = process.env,
): SchedulerConfig {
  return loadEnvConfig(SCHEDULER_ENV, env);
}

/** The idle pause when `SLUICE_SCHEDULER_IDLE_POLL_MS` is 0, in polls. */
export const IDLE_POLL_FACTOR = 5;

/** The longest pause of an idle loop (`SLUICE_SCHEDULER_IDLE_POLL_MS`, or its default). */
export function idlePollMsOf(config: SchedulerConfig): number {
  return config.SLUICE_SCHEDULER_IDLE_POLL_MS || IDLE_POLL_FACTOR * config.SLUICE_SCHEDULER_POLL_MS;
}

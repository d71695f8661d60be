/**
 * Retention: deletes tasks that finished long enough ago (with their steps, events, timers and
 * redriven dead letters), leaving a tombstone of each one's idempotency key, and deletes tombstones
 * whose window has passed. Small batches, one short transaction each, that skip locked rows: the
 * hot path never waits on it.
 *
 * One replica runs it at a time (the `retention` lease), so the deletion load stays that of one
 * deleter however many replicas run; `SKIP LOCKED` keeps two deleters apart anyway while a lease
 * changes hands.
 */
import type { KV } from '@nats-io/kv';
import { deleteExpiredTombstones, deleteFinishedTasks, type Database } from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import { startBatchLoop } from './batch-loop.js';
import { createLeaseLoop, type LeaseLoop } from './lease-loop.js';

/** The lease key of retention in the leases bucket. */
export const RETENTION_LEASE_KEY = 'retention';

/** What a retention batch needs. */
export interface RetentionDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Tasks that finished longer ago than this are deleted. */
  readonly ageMs: number;
  /** How long a deleted task's idempotency key stays taken. */
  readonly tombstoneTtlMs: number;
  /** Tasks (and expired tombstones) per transaction. */
  readonly batchSize: number;
}

/** Deletes one batch of old tasks and one of expired tombstones; true when more may be waiting. */
export async function retentionBatch(deps: RetentionDeps): Promise<boolean> {
  const deleted = await deleteFinishedTasks(deps.db, {
    finishedBefore: new Date(Date.now() - deps.ageMs),
    tombstoneTtlMs: deps.tombstoneTtlMs,
    limit: deps.batchSize,
  });
  const expired = await deleteExpiredTombstones(deps.db, deps.batchSize);
  const counts: Record<string, number> = {
    tasks: deleted.tasks,
    task_steps: deleted.steps,
    task_events: deleted.events,
    task_timers: deleted.timers,
    dead_letters: deleted.deadLetters,
    idempotency_tombstones: expired,
  };
  for (const [table, rows] of Object.entries(counts)) {
    if (rows > 0) deps.metrics.retentionDeleted.inc({ table }, rows);
  }
  if (deleted.tasks > 0 || expired > 0) {
    deps.log.debug(
      { ...deleted, expired_tombstones: expired },
      'retention deleted finished tasks and expired tombstones',
    );
  }
  return deleted.tasks === deps.batchSize || expired === deps.batchSize;
}

/** Options of {@link startRetention}. */
export interface StartRetentionOptions extends RetentionDeps {
  readonly kv: KV;
  readonly holderId: string;
  readonly leaseTtlMs: number;
  /** Pause between passes once nothing old enough is left. */
  readonly intervalMs: number;
}

/** Competes for the retention lease and runs the retention loop while holding it. */
export async function startRetention(options: StartRetentionOptions): Promise<LeaseLoop> {
  const retention = createLeaseLoop({
    kv: options.kv,
    key: RETENTION_LEASE_KEY,
    holderId: options.holderId,
    ttlMs: options.leaseTtlMs,
    log: options.log,
    duty: 'retention',
    startTenure: () => ({
      loop: startBatchLoop({
        name: 'retention',
        pollMs: options.intervalMs,
        log: options.log,
        runBatch: () => retentionBatch(options),
      }),
    }),
  });
  await retention.start();
  return retention;
}

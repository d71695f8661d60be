/**
 * How the peer adapters (BullMQ, pg-boss, Graphile Worker) carry a {@link Job} through their
 * queues: as the job's JSON payload, read back and checked on the consumer side so a malformed
 * payload fails the job instead of reaching the ledger as a bogus id.
 */
import type { Job } from '../system.js';

/** What the peers store as the job's data: exactly the harness's job, nothing else. */
export interface PeerPayload {
  readonly id: string;
  readonly priority?: 'high' | 'low';
  readonly scheduledAt?: number;
}

/** Enqueue in-flight bound of the one-at-a-time variants: calls awaited independently. */
export const ONE_AT_A_TIME_IN_FLIGHT = 32;
/** Jobs per call of the batched variants (the raw Postgres floor batches 500 too). */
export const PEER_BATCH = 500;
/** Calls of the batched variants in flight at once. */
export const BATCHES_IN_FLIGHT = 4;

export function toPayload(job: Job): PeerPayload {
  const payload: { id: string; priority?: 'high' | 'low'; scheduledAt?: number } = { id: job.id };
  if (job.priority !== undefined) payload.priority = job.priority;
  if (job.scheduledAt !== undefined) payload.scheduledAt = job.scheduledAt;
  return payload;
}

/** The job a consumer received, or an error naming what was wrong with it. */
export function fromPayload(value: unknown): Job {
  if (typeof value !== 'object' || value === null) throw new Error('job payload is not an object');
  const { id, priority, scheduledAt } = value as Record<string, unknown>;
  if (typeof id !== 'string') throw new Error('job payload has no string id');
  const job: { id: string; priority?: 'high' | 'low'; scheduledAt?: number } = { id };
  if (priority === 'high' || priority === 'low') job.priority = priority;
  if (typeof scheduledAt === 'number') job.scheduledAt = scheduledAt;
  return job;
}

/** A short random suffix for per-run queue names. */
export function runSuffix(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

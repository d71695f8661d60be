/**
 * What every system under comparison offers the benchmark harness (issue 7): Sluice through its
 * public API, BullMQ, pg-boss and Graphile Worker through theirs, and the raw limits (JetStream
 * publish/consume with acks, a Postgres insert + update loop). One adapter per system and
 * variant in `systems/`; the harness never reaches into a system otherwise.
 */

/** One unit of work: a no-op task the handler acknowledges. */
export interface Job {
  /** Unique per run; the ledger counts every id exactly once. */
  readonly id: string;
  /** `high` for the priority-isolation scenario; absent: the system's default. */
  readonly priority?: 'high' | 'low';
  /** When the harness meant to send it (ms, `performance.timeOrigin + now()`), for latency. */
  readonly scheduledAt?: number;
}

/** What a handler is told when a job starts (the harness records the time itself). */
export type JobHandler = (job: Job) => Promise<void>;

/** How durable an acknowledged enqueue is on this system, as configured — shown on every result. */
export type Durability =
  | 'fsync per commit' // Postgres with synchronous_commit on
  | 'page cache, fsync ≤ 2 min' // nats-server 2.9 JetStream
  | 'AOF fsync every second' // redis-server --appendonly yes --appendfsync everysec
  | 'memory only'; // the machine's Redis (no persistence)

export interface SystemInfo {
  /** e.g. `sluice`, `bullmq`, `bullmq-aof`, `pg-boss`, `graphile-worker`, `raw-jetstream`. */
  readonly name: string;
  readonly durability: Durability;
  /** Whether `enqueue` uses the system's batch API (reported separately from one-at-a-time). */
  readonly batched: boolean;
}

export interface StartOptions {
  readonly handler: JobHandler;
  /** Jobs handled at once by this system's workers, in all. */
  readonly concurrency: number;
}

export interface QueueSystem extends SystemInfo {
  /** Prepares queues, tables, streams (fresh for the run); nothing consumes yet. */
  setup(): Promise<void>;
  /** Enqueues jobs durably as the system acknowledges them; resolves once all are accepted. */
  enqueue(jobs: readonly Job[]): Promise<void>;
  /** Starts consuming: every job is passed to the handler, and acknowledged once it resolves. */
  startWorkers(options: StartOptions): Promise<void>;
  /** Stops workers and releases every connection; removes what `setup` created. */
  teardown(): Promise<void>;
  /** Versions of the software under test (client library, server), for the result table. */
  versions(): Promise<Record<string, string>>;
}

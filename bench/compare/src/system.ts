/**
 * What every system under comparison offers the benchmark harness (issue 7): Sluice through its
 * public API, BullMQ, pg-boss and Graphile Worker through theirs, and the raw limits (JetStream
 * publish/consume with acks, a Postgres insert + update loop). One adapter per system and
 * variant in `systems/`; the harness never reaches into a system otherwise.
 */
import type { PostgresWorkMark } from './postgres-work.js';

/** One unit of work: a no-op task the handler acknowledges. */
export interface Job {
  /** Unique per run; the ledger counts every id exactly once. */
  readonly id: string;
  /** `high` for the priority-isolation scenario; absent: the system's default. */
  readonly priority?: 'high' | 'low';
  /** When the harness meant to send it (ms, `performance.timeOrigin + now()`), for latency. */
  readonly scheduledAt?: number;
  /**
   * When its handler began, on the clock of `scheduledAt`, where the handler runs in another
   * process and tells the harness later (Sluice's executors); absent: the handler is called in
   * the harness, and the call is the start.
   */
  readonly startedAt?: number;
}

/**
 * What a handler is told when a job starts (the harness records the time itself, or takes
 * `Job.startedAt` when the adapter has it).
 */
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
  /**
   * The OS processes of the system besides the bench process, for the footprint scenario: its
   * own servers and services, and the backends a shared server runs for it. Called again as the
   * run goes on (connections and workers start later); absent: only the bench process is measured.
   */
  processes?(): Promise<readonly SystemProcess[]>;
  /**
   * Where the system keeps its jobs in Postgres: the server's transaction and WAL counters now
   * (`POSTGRES_WORK_QUERY` on the adapter's own connection), for the work per job the
   * footprint and end-to-end scenarios report beside the CPU. Absent for the other systems.
   */
  postgresWork?(): Promise<PostgresWorkMark>;
  /**
   * Starts observing when jobs complete (called after `setup`, before `enqueue` and
   * `startWorkers`), through what the system offers an observer: an event, a stream, its record.
   * Absent where the system offers no sound way; its completion latencies are then not reported.
   */
  watchCompletions?(): Promise<CompletionWatch>;
  /**
   * What each of the system's own Node processes holds after a full garbage collection, by the
   * role {@link processes} gives it (processes of one role summed), for the footprint scenario:
   * their resident memory also counts heap that V8 has not collected yet. Absent where the
   * system's code runs in no process of its own but the bench process (whose heap is the
   * harness's too), or in no Node process at all.
   */
  liveHeaps?(): Promise<ReadonlyMap<string, LiveHeap>>;
}

/** A Node process's memory right after a full garbage collection. */
export interface LiveHeap {
  /** The JavaScript objects still reachable (`process.memoryUsage().heapUsed`). */
  readonly heapUsedBytes: number;
  /** Its resident memory then: what the collection gave back to the system is gone from it. */
  readonly rssBytes: number;
}

/** Completion times of one run, as far as the system lets an observer know them. */
export interface CompletionWatch {
  /**
   * When each of `ids` completed (epoch ms, the clock of {@link Job.scheduledAt}), once every one
   * did or `timeoutMs` passed; ids not seen complete are absent.
   */
  completions(ids: readonly string[], timeoutMs: number): Promise<ReadonlyMap<string, number>>;
  /** Stops observing (before `teardown`); idempotent. */
  stop(): Promise<void>;
}

/** One OS process of a system under test (see {@link QueueSystem.processes}). */
export interface SystemProcess {
  /** What it is, e.g. `gateway`, `redis-server`; processes of one role are reported summed. */
  readonly role: string;
  readonly pid: number;
  /**
   * A server the machine runs for everyone (its nats-server, its Redis): its memory is reported
   * as the growth over the run, and its CPU time includes whatever else used it meanwhile.
   */
  readonly shared?: boolean;
  /** Count its descendants with it (a `node --import tsx` service and its esbuild). */
  readonly withDescendants?: boolean;
  /** Count only its own pages (`RssAnon`), as for Postgres backends that map shared buffers. */
  readonly privateMemory?: boolean;
  /** It runs the system's workers: the bench process is then only the client. */
  readonly runsWorkers?: boolean;
  /**
   * Its whole life is the run's work (a Postgres backend a pool opens under load): when it
   * appears during a run, its CPU time from its start counts. Otherwise a process that appears
   * counts from when it is first seen (a started worker process's start-up is not per job).
   */
  readonly countFromStart?: boolean;
}

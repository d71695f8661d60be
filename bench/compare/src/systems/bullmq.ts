/**
 * BullMQ through its public API (issue 7), in two tiers:
 * - `bullmq`: the machine's Redis at 127.0.0.1:6379, which persists nothing (`memory only`);
 * - `bullmq-aof`: a private redis-server with `--appendonly yes --appendfsync everysec`.
 * Settings are the documented ones for throughput on a no-op workload: one Worker whose
 * `concurrency` is the harness's, finished jobs removed at once (`removeOnComplete`) so Redis
 * memory stays flat, `addBulk` for the batched variant and `add` one job per call otherwise.
 * Priorities use the `priority` option (1 is the highest; jobs without one are not prioritized).
 * Each run gets its own queue name; teardown obliterates the queue.
 */
import { Queue, Worker, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { CompletionLog } from '../completion-log.js';
import { chunks, forEachBounded } from '../pool.js';
import type { Job, QueueSystem, StartOptions } from '../system.js';
import { packageVersion } from '../versions.js';
import {
  BATCHES_IN_FLIGHT,
  fromPayload,
  ONE_AT_A_TIME_IN_FLIGHT,
  PEER_BATCH,
  runSuffix,
  toPayload,
  type PeerPayload,
} from './peer-job.js';
import { redisProcessId } from './footprint-processes.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

/** Where the machine's Redis listens (no persistence). */
export const MACHINE_REDIS = { host: '127.0.0.1', port: 6379 } as const;
/** The BullMQ job name of every benchmark job (one queue per run already separates runs). */
const JOB_NAME = 'noop';
/** BullMQ priorities: 1 is the highest; 0 would mean "not prioritized". */
const PRIORITY = { high: 1, low: 10 } as const;

export interface BullmqOptions {
  /** Private AOF redis-server (`bullmq-aof`) instead of the machine's Redis (`bullmq`). */
  readonly aof: boolean;
  readonly batched: boolean;
}

/** The adapter, with what a test needs to check that teardown left nothing behind. */
export interface BullmqSystem extends QueueSystem {
  /** This run's queue name (set by `setup`). */
  readonly queueName: string | undefined;
  /** Host and port of the Redis in use (set by `setup`). */
  readonly redis: { readonly host: string; readonly port: number } | undefined;
  /** The private server of the AOF tier, while it runs. */
  readonly privateServer: RedisServer | undefined;
}

export function createBullmq(options: BullmqOptions): BullmqSystem {
  let server: RedisServer | undefined;
  let redis: { host: string; port: number } | undefined;
  let queueName: string | undefined;
  let queue: Queue<PeerPayload> | undefined;
  let worker: Worker<PeerPayload> | undefined;
  let redisVersion = 'unknown';
  let completed: CompletionLog | undefined;

  const connection = (): ConnectionOptions => {
    if (!redis) throw new Error('bullmq: setup() first');
    // Workers block on Redis: BullMQ requires unlimited retries per request on their connection.
    return { host: redis.host, port: redis.port, maxRetriesPerRequest: null };
  };
  const ready = (): Queue<PeerPayload> => {
    if (!queue) throw new Error('bullmq: setup() first');
    return queue;
  };
  const jobOptions = (job: Job): JobsOptions =>
    job.priority === undefined ? {} : { priority: PRIORITY[job.priority] };

  return {
    name: options.aof ? 'bullmq-aof' : 'bullmq',
    durability: options.aof ? 'AOF fsync every second' : 'memory only',
    batched: options.batched,
    get queueName() {
      return queueName;
    },
    get redis() {
      return redis;
    },
    get privateServer() {
      return server;
    },

    async setup() {
      if (options.aof) {
        server = await startRedisServer();
        redis = { host: server.host, port: server.port };
      } else {
        redis = { ...MACHINE_REDIS };
      }
      queueName = `sluice-bench-${runSuffix()}`;
      queue = new Queue<PeerPayload>(queueName, {
        connection: connection(),
        defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 },
      });
      await queue.waitUntilReady();
      const client = await queue.client;
      const info = await client.info();
      redisVersion = /redis_version:([^\r\n]+)/.exec(info)?.[1] ?? 'unknown';
    },

    async enqueue(jobs: readonly Job[]) {
      const q = ready();
      if (!options.batched) {
        await forEachBounded(jobs, ONE_AT_A_TIME_IN_FLIGHT, async (job) => {
          await q.add(JOB_NAME, toPayload(job), jobOptions(job));
        });
        return;
      }
      await forEachBounded(chunks(jobs, PEER_BATCH), BATCHES_IN_FLIGHT, async (slice) => {
        await q.addBulk(
          slice.map((job) => ({ name: JOB_NAME, data: toPayload(job), opts: jobOptions(job) })),
        );
      });
    },

    async startWorkers(start: StartOptions) {
      if (!queueName) throw new Error('bullmq: setup() first');
      worker = new Worker<PeerPayload>(
        queueName,
        async (job) => {
          await start.handler(fromPayload(job.data));
        },
        {
          connection: connection(),
          concurrency: Math.max(1, start.concurrency),
          removeOnComplete: { count: 0 },
          removeOnFail: { count: 1000 },
        },
      );
      // An 'error' event without a listener would crash the process; report it instead.
      worker.on('error', (error) => console.error(`bullmq worker: ${error.message}`));
      // Emitted once BullMQ moved the job to completed in Redis.
      worker.on('completed', (job) => completed?.record(fromPayload(job.data).id));
      await worker.waitUntilReady();
    },

    async teardown() {
      try {
        await worker?.close();
        if (queue) {
          await queue.obliterate({ force: true });
          await queue.close();
        }
      } finally {
        worker = undefined;
        queue = undefined;
        await server?.stop();
      }
    },

    watchCompletions() {
      completed = new CompletionLog();
      return Promise.resolve(completed);
    },

    async versions() {
      return { bullmq: await packageVersion('bullmq'), redis: redisVersion };
    },

    async processes() {
      if (server) return [{ role: 'redis-server (private)', pid: server.pid }];
      // The machine's Redis serves whoever else uses it too: it is shared.
      const pid = redisProcessId(await (await ready().client).info());
      return pid === undefined ? [] : [{ role: 'redis-server (shared)', pid, shared: true }];
    },
  };
}

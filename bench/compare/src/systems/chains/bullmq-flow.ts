/**
 * BullMQ's nearest equivalent of a three-step task (issue 7, workload 4): a flow
 * (`FlowProducer.add`), where a parent job runs only once its children completed — the chain as
 * nested children, step 2 the root, step 1 its child, step 0 the grandchild, so the steps run
 * 0 → 1 → 2. Each step has its own queue and Worker (concurrency: the harness's), as three kinds
 * of work would; finished jobs are removed at once (their results stay with the parent). One flow
 * per `add` call, calls in flight as the one-step adapter's (systems/bullmq.ts). `bullmq` runs on
 * the machine's Redis (memory only), `bullmq-aof` on a private AOF redis-server.
 */
import { FlowProducer, Queue, Worker, type ConnectionOptions, type FlowJob } from 'bullmq';
import type { Chain, ChainStartOptions, ChainSystem } from '../../chain-system.js';
import { CHAIN_STEPS } from '../../chain-system.js';
import { forEachBounded } from '../../pool.js';
import { packageVersion } from '../../versions.js';
import { MACHINE_REDIS } from '../bullmq.js';
import { ONE_AT_A_TIME_IN_FLIGHT, runSuffix } from '../peer-job.js';
import { startRedisServer, type RedisServer } from '../redis-server.js';

/** What each step's job carries. */
interface StepPayload {
  readonly id: string;
  readonly step: number;
}

const REMOVE = { removeOnComplete: true, removeOnFail: 1000 } as const;

export function createBullmqFlow(options: { aof: boolean }): ChainSystem {
  let server: RedisServer | undefined;
  let redis: { host: string; port: number } | undefined;
  let queueNames: string[] = [];
  let flows: FlowProducer | undefined;
  let workers: Worker<StepPayload>[] = [];
  let redisVersion = 'unknown';

  const connection = (): ConnectionOptions => {
    if (!redis) throw new Error('bullmq: setup() first');
    // Workers block on Redis: BullMQ requires unlimited retries per request on their connection.
    return { host: redis.host, port: redis.port, maxRetriesPerRequest: null };
  };

  /** The flow of one chain: the last step at the root, each earlier step a child of the next. */
  const flowOf = (chain: Chain): FlowJob => {
    let flow: FlowJob | undefined;
    for (let step = 0; step < CHAIN_STEPS; step += 1) {
      flow = {
        name: `step-${step}`,
        queueName: queueNames[step]!,
        data: { id: chain.id, step } satisfies StepPayload,
        opts: REMOVE,
        ...(flow === undefined ? {} : { children: [flow] }),
      };
    }
    return flow!;
  };

  return {
    name: options.aof ? 'bullmq-aof' : 'bullmq',
    durability: options.aof ? 'AOF fsync every second' : 'memory only',
    batched: false,

    async setup() {
      if (options.aof) {
        server = await startRedisServer();
        redis = { host: server.host, port: server.port };
      } else {
        redis = { ...MACHINE_REDIS };
      }
      const run = runSuffix();
      queueNames = Array.from({ length: CHAIN_STEPS }, (_, step) => `sluice-chain-${run}-${step}`);
      flows = new FlowProducer({ connection: connection() });
      flows.on('error', (error) => console.error(`bullmq flow producer: ${error.message}`));
      await flows.waitUntilReady();
      const client = await flows.client;
      redisVersion = /redis_version:([^\r\n]+)/.exec(await client.info())?.[1] ?? 'unknown';
    },

    async enqueue(chains: readonly Chain[]) {
      const producer = flows;
      if (!producer) throw new Error('bullmq: setup() first');
      await forEachBounded(chains, ONE_AT_A_TIME_IN_FLIGHT, async (chain) => {
        await producer.add(flowOf(chain));
      });
    },

    async startWorkers(start: ChainStartOptions) {
      workers = queueNames.map((queueName, step) => {
        const worker = new Worker<StepPayload>(
          queueName,
          async (job) => {
            const { id, step: jobStep } = job.data;
            if (typeof id !== 'string' || jobStep !== step) {
              throw new Error(`malformed step job in ${queueName}`);
            }
            await start.onStep(id, jobStep);
          },
          {
            connection: connection(),
            concurrency: Math.max(1, start.concurrency),
            removeOnComplete: { count: 0 },
            removeOnFail: { count: 1000 },
          },
        );
        worker.on('error', (error) => console.error(`bullmq worker: ${error.message}`));
        return worker;
      });
      await Promise.all(workers.map((w) => w.waitUntilReady()));
    },

    async teardown() {
      try {
        await Promise.all(workers.map((w) => w.close()));
        for (const name of queueNames) {
          if (!redis) break;
          const queue = new Queue(name, { connection: connection() });
          await queue.obliterate({ force: true });
          await queue.close();
        }
        await flows?.close();
      } finally {
        workers = [];
        flows = undefined;
        await server?.stop();
        server = undefined;
      }
    },

    async versions() {
      return { bullmq: await packageVersion('bullmq'), redis: redisVersion };
    },
  };
}

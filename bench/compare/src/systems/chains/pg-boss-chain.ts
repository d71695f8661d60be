/**
 * pg-boss's nearest equivalent of a three-step task (issue 7, workload 4): chained jobs, a queue
 * per step, the handler of step k sending the job of step k + 1 once its work is done (pg-boss
 * completes a job after its handler resolved, in a transaction of its own: a step retried after
 * a crash could send its successor twice — nothing here fails, so the ledger would show it). The
 * workers are the one-step adapter's (systems/pg-boss.ts) per queue: `batchSize` up to the
 * harness's concurrency, the shortest polling interval (0.5 s), `notifyWorker` after a full batch.
 * Chains start with a `send` of step 0, one per call, calls in flight as the one-step adapter's.
 */
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import PgBoss from 'pg-boss';
import type { Chain, ChainStartOptions, ChainSystem } from '../../chain-system.js';
import { CHAIN_STEPS } from '../../chain-system.js';
import { forEachBounded } from '../../pool.js';
import { packageVersion } from '../../versions.js';
import { ONE_AT_A_TIME_IN_FLIGHT, runSuffix } from '../peer-job.js';

const POLLING_INTERVAL_SECONDS = 0.5;
/** As the one-step adapter: fewer, fuller fetches drain a backlog faster. */
const MAX_BATCH_SIZE = 50;
/** Connections of pg-boss's pool (its default is 10). */
const POOL_SIZE = 10;
/** How long teardown waits for completions pg-boss sends without awaiting them. */
const SETTLE_TIMEOUT_MS = 10_000;

interface StepPayload {
  readonly id: string;
  readonly step: number;
}

export function createPgBossChain(): ChainSystem {
  let database: TestDatabase | undefined;
  let boss: PgBoss | undefined;
  let queues: string[] = [];
  let serverVersion = 'unknown';

  const ready = (): PgBoss => {
    if (!boss) throw new Error('pg-boss: setup() first');
    return boss;
  };

  return {
    name: 'pg-boss',
    durability: 'fsync per commit',
    batched: false,

    async setup() {
      database = await createTestDatabase();
      boss = new PgBoss({ connectionString: database.url, max: POOL_SIZE, schedule: false });
      boss.on('error', (error) => console.error(`pg-boss: ${error.message}`));
      await boss.start();
      const run = runSuffix();
      queues = Array.from({ length: CHAIN_STEPS }, (_, step) => `sluice_chain_${run}_${step}`);
      for (const queue of queues) await boss.createQueue(queue);
      const { rows } = await boss.getDb().executeSql('show server_version', []);
      const row = rows[0] as { server_version?: unknown } | undefined;
      serverVersion = typeof row?.server_version === 'string' ? row.server_version : 'unknown';
    },

    async enqueue(chains: readonly Chain[]) {
      const b = ready();
      await forEachBounded(chains, ONE_AT_A_TIME_IN_FLIGHT, async (chain) => {
        const id = await b.send(queues[0]!, { id: chain.id, step: 0 } satisfies StepPayload);
        if (id === null) throw new Error(`pg-boss refused chain ${chain.id}`);
      });
    },

    async startWorkers(start: ChainStartOptions) {
      const b = ready();
      const concurrency = Math.max(1, start.concurrency);
      const loops = Math.ceil(concurrency / MAX_BATCH_SIZE);
      const batchSize = Math.ceil(concurrency / loops);
      for (const [step, queue] of queues.entries()) {
        const successor = queues[step + 1];
        for (let i = 0; i < loops; i += 1) {
          const self: { id?: string } = {};
          self.id = await b.work<StepPayload>(
            queue,
            { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS },
            async (batch) => {
              if (batch.length === batchSize && self.id !== undefined) b.notifyWorker(self.id);
              await Promise.all(
                batch.map(async (job) => {
                  const { id, step: jobStep } = job.data;
                  if (typeof id !== 'string' || jobStep !== step) {
                    throw new Error(`malformed step job in ${queue}`);
                  }
                  await start.onStep(id, step);
                  if (successor === undefined) return;
                  const sent = await b.send(successor, { id, step: step + 1 } as StepPayload);
                  if (sent === null) throw new Error(`pg-boss refused step ${step + 1} of ${id}`);
                }),
              );
            },
          );
        }
      }
    },

    async teardown() {
      try {
        if (boss) {
          const b = boss;
          for (const queue of queues) await b.offWork(queue);
          const deadline = Date.now() + SETTLE_TIMEOUT_MS;
          while (Date.now() < deadline && (await activeJobs(b, queues)) > 0) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          await b.stop({ graceful: true, wait: true, timeout: 5_000 });
        }
      } finally {
        boss = undefined;
        await database?.drop();
        database = undefined;
      }
    },

    async versions() {
      return { 'pg-boss': await packageVersion('pg-boss'), postgres: serverVersion };
    },
  };
}

/** Jobs of `queues` a worker holds (fetched, not yet completed or failed). */
async function activeJobs(boss: PgBoss, queues: readonly string[]): Promise<number> {
  const { rows } = await boss
    .getDb()
    .executeSql(
      `SELECT count(*)::int AS n FROM pgboss.job WHERE name = ANY($1) AND state = 'active'`,
      [queues],
    );
  const row = rows[0] as { n?: unknown } | undefined;
  return typeof row?.n === 'number' ? row.n : 0;
}

/**
 * Graphile Worker's nearest equivalent of a three-step task (issue 7, workload 4): chained jobs,
 * a task per step, the task of step k adding the job of step k + 1 with `helpers.addJob` once its
 * work is done. In 0.16 a task runs outside any transaction of Graphile's (the helpers' client is
 * a pool connection; the job is completed afterwards, on its own), so the successor's insert and
 * the step's completion cannot share one: a step retried after a crash could add its successor
 * twice — nothing here fails, so the ledger would show it. One runner with all three tasks, as
 * Graphile is deployed; its concurrency is shared by every task, so it is three times the
 * harness's (the other systems run a pool of that size per step). New jobs wake it through
 * LISTEN/NOTIFY. Chains start with an `addJob` of step 0, one per call.
 */
import { createRequire } from 'node:module';
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import {
  Logger,
  makeWorkerUtils,
  run,
  type Runner,
  type RunnerOptions,
  type Task,
  type WorkerUtils,
} from 'graphile-worker';
import type { Chain, ChainStartOptions, ChainSystem } from '../../chain-system.js';
import { CHAIN_STEPS } from '../../chain-system.js';
import { forEachBounded } from '../../pool.js';
import { packageVersion } from '../../versions.js';
import { ONE_AT_A_TIME_IN_FLIGHT } from '../peer-job.js';

/** Connections shared by enqueue, the runner and the tasks' `addJob` (opened as needed). */
const POOL_SIZE = 20;

type PgPool = NonNullable<RunnerOptions['pgPool']>;
/** Graphile's own node-postgres, so the adapter owns (and awaits) the pool; see graphile.ts. */
const { Pool } = createRequire(import.meta.resolve('graphile-worker'))('pg') as {
  Pool: new (config: { connectionString: string; max: number }) => PgPool;
};

const logger = new Logger(() => (level, message) => {
  if (String(level) === 'error') console.error(`graphile-worker: ${message}`);
});

const taskOf = (step: number) => `chain_step_${step}`;

interface StepPayload {
  readonly id: string;
  readonly step: number;
}

export function createGraphileChain(): ChainSystem {
  let database: TestDatabase | undefined;
  let pool: PgPool | undefined;
  let utils: WorkerUtils | undefined;
  let runner: Runner | undefined;
  let serverVersion = 'unknown';

  return {
    name: 'graphile-worker',
    durability: 'fsync per commit',
    batched: false,

    async setup() {
      database = await createTestDatabase();
      pool = new Pool({ connectionString: database.url, max: POOL_SIZE });
      // Connections die when teardown drops the database; an unheard 'error' would crash.
      pool.on('error', () => undefined);
      utils = await makeWorkerUtils({ pgPool: pool, logger });
      await utils.migrate();
      serverVersion = await utils.withPgClient(async (client) => {
        const { rows } = await client.query<{ server_version: string }>('show server_version');
        return rows[0]?.server_version ?? 'unknown';
      });
    },

    async enqueue(chains: readonly Chain[]) {
      const u = utils;
      if (!u) throw new Error('graphile-worker: setup() first');
      await forEachBounded(chains, ONE_AT_A_TIME_IN_FLIGHT, async (chain) => {
        await u.addJob(taskOf(0), { id: chain.id, step: 0 } satisfies StepPayload);
      });
    },

    async startWorkers(start: ChainStartOptions) {
      if (!pool) throw new Error('graphile-worker: setup() first');
      const taskList: Record<string, Task> = {};
      for (let step = 0; step < CHAIN_STEPS; step += 1) {
        taskList[taskOf(step)] = async (payload, helpers) => {
          const { id, step: jobStep } = (payload ?? {}) as Partial<StepPayload>;
          if (typeof id !== 'string' || jobStep !== step) {
            throw new Error(`malformed job of ${taskOf(step)}`);
          }
          await start.onStep(id, step);
          if (step + 1 < CHAIN_STEPS) {
            await helpers.addJob(taskOf(step + 1), { id, step: step + 1 } satisfies StepPayload);
          }
        };
      }
      runner = await run({
        pgPool: pool,
        concurrency: CHAIN_STEPS * Math.max(1, start.concurrency),
        noHandleSignals: true,
        logger,
        taskList,
      });
    },

    async teardown() {
      try {
        await runner?.stop();
        await utils?.release();
        await pool?.end();
      } finally {
        runner = undefined;
        utils = undefined;
        pool = undefined;
        await database?.drop();
        database = undefined;
      }
    },

    async versions() {
      return {
        'graphile-worker': await packageVersion('graphile-worker'),
        postgres: serverVersion,
      };
    },
  };
}

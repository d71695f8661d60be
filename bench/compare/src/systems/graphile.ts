/**
 * Graphile Worker 0.16 through its public API (issue 7), on a fresh database of the machine's
 * Postgres (commits wait for the disk: `fsync per commit`). Enqueue: `addJob` one job per call, or
 * for the batched variant the bulk SQL function `graphile_worker.add_jobs(job_spec[])` that 0.16
 * documents (its JavaScript `addJobs` came later). Consume: `run()` with the harness's
 * concurrency; new jobs wake workers through LISTEN/NOTIFY, so no polling setting matters here.
 * Priorities: `priority`, numerically smaller first (default 0).
 */
import { createRequire } from 'node:module';
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import {
  Logger,
  makeWorkerUtils,
  run,
  type Runner,
  type RunnerOptions,
  type TaskSpec,
  type WorkerUtils,
} from 'graphile-worker';
import { CompletionLog } from '../completion-log.js';
import { chunks, forEachBounded } from '../pool.js';
import type { Job, QueueSystem, StartOptions } from '../system.js';
import { packageVersion } from '../versions.js';
import {
  BATCHES_IN_FLIGHT,
  fromPayload,
  ONE_AT_A_TIME_IN_FLIGHT,
  PEER_BATCH,
  toPayload,
} from './peer-job.js';
import { POSTGRES_BACKENDS_QUERY, postgresBackends } from './footprint-processes.js';
import { POSTGRES_WORK_QUERY, postgresWorkOf, type PostgresWorkRow } from '../postgres-work.js';

/** The task every benchmark job runs. */
const TASK = 'noop';
/** Graphile priorities: numerically smaller runs first, 0 is the default. */
const PRIORITY = { high: -10, low: 10 } as const;
/**
 * Connections of the pool shared by enqueue and the runner: above Graphile's default of 10 so a
 * runner of 16 jobs at once (its LISTEN connection included) does not queue for connections, and
 * bounded for a server shared with other work. The pool opens connections only as they are needed.
 */
const POOL_SIZE = 20;

/** node-postgres's pool, as Graphile types it. */
type PgPool = NonNullable<RunnerOptions['pgPool']>;
/**
 * Graphile's own node-postgres, so the adapter can own the pool: a pool Graphile creates from a
 * connection string is ended without being awaited and loses its error listener first, so the
 * database drop at teardown can kill a connection that then crashes the process.
 */
const { Pool } = createRequire(import.meta.resolve('graphile-worker'))('pg') as {
  Pool: new (config: { connectionString: string; max: number }) => PgPool;
};

/** Errors only: Graphile's info lines would drown the progress display. */
const logger = new Logger(() => (level, message) => {
  if (String(level) === 'error') console.error(`graphile-worker: ${message}`);
});

/** The adapter, with what a test needs to check that teardown left nothing behind. */
export interface GraphileSystem extends QueueSystem {
  /** The run's database (set by `setup`, dropped by `teardown`). */
  readonly databaseName: string | undefined;
}

export function createGraphileWorker(options: { batched: boolean }): GraphileSystem {
  let database: TestDatabase | undefined;
  let pool: PgPool | undefined;
  let utils: WorkerUtils | undefined;
  let runner: Runner | undefined;
  let serverVersion = 'unknown';
  let completed: CompletionLog | undefined;

  const ready = (): WorkerUtils => {
    if (!utils) throw new Error('graphile-worker: setup() first');
    return utils;
  };
  const spec = (job: Job): TaskSpec =>
    job.priority === undefined ? {} : { priority: PRIORITY[job.priority] };

  return {
    name: 'graphile-worker',
    durability: 'fsync per commit',
    batched: options.batched,
    get databaseName() {
      return database?.name;
    },

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

    async enqueue(jobs: readonly Job[]) {
      const u = ready();
      if (!options.batched) {
        await forEachBounded(jobs, ONE_AT_A_TIME_IN_FLIGHT, async (job) => {
          await u.addJob(TASK, toPayload(job), spec(job));
        });
        return;
      }
      await forEachBounded(chunks(jobs, PEER_BATCH), BATCHES_IN_FLIGHT, async (slice) => {
        const specs = slice.map((job) => ({
          identifier: TASK,
          payload: toPayload(job),
          priority: job.priority === undefined ? null : PRIORITY[job.priority],
        }));
        const added = await u.withPgClient((client) =>
          client.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM graphile_worker.add_jobs(
               ARRAY(SELECT json_populate_recordset(NULL::graphile_worker.job_spec, $1::json)))`,
            [JSON.stringify(specs)],
          ),
        );
        const n = added.rows[0]?.n;
        if (n !== slice.length) throw new Error(`add_jobs added ${n} of ${slice.length} jobs`);
      });
    },

    async startWorkers(start: StartOptions) {
      if (!pool) throw new Error('graphile-worker: setup() first');
      runner = await run({
        pgPool: pool,
        concurrency: Math.max(1, start.concurrency),
        // The harness owns the process's signals.
        noHandleSignals: true,
        logger,
        taskList: {
          [TASK]: async (payload) => {
            await start.handler(fromPayload(payload));
          },
        },
      });
      // 'job:complete' without an error comes after completeJob resolved ('job:success' before it).
      const log = completed;
      if (log) {
        runner.events.on('job:complete', ({ job, error }) => {
          if (error === undefined || error === null) log.record(fromPayload(job.payload).id);
        });
      }
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
      }
    },

    watchCompletions() {
      completed = new CompletionLog();
      return Promise.resolve(completed);
    },

    async versions() {
      return {
        'graphile-worker': await packageVersion('graphile-worker'),
        postgres: serverVersion,
      };
    },

    async postgresWork() {
      const { rows } = await ready().withPgClient((client) =>
        client.query<PostgresWorkRow>(POSTGRES_WORK_QUERY),
      );
      return postgresWorkOf(rows[0]);
    },

    async processes() {
      const { rows } = await ready().withPgClient((client) =>
        client.query<{ pid: number }>(POSTGRES_BACKENDS_QUERY),
      );
      return postgresBackends(rows);
    },
  };
}

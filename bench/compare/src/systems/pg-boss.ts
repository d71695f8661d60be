/**
 * pg-boss 10 through its public API (issue 7), on a fresh database of the machine's Postgres
 * (commits wait for the disk: `fsync per commit`). Enqueue: `send` one job per call, or `insert`
 * for the batched variant. Consume: pg-boss polls. Its documented throughput settings are
 * `batchSize` (a handler receives an array of jobs, completed together) and, past one batch, more
 * `work()` calls (v10 dropped teamSize), with the shortest polling interval it accepts (0.5 s). A worker whose
 * fetch came back full calls `notifyWorker` (documented: "bypass the polling interval for this
 * iteration"), so a backlog drains without a polling pause between batches; an idle queue is still
 * found by polling, which is pg-boss's design.
 * Priorities: `priority`, higher first.
 */
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import PgBoss from 'pg-boss';
import { chunks, forEachBounded } from '../pool.js';
import type { CompletionWatch, Job, QueueSystem, StartOptions } from '../system.js';
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
import { POSTGRES_BACKENDS_QUERY, postgresBackends } from './footprint-processes.js';
import { POSTGRES_WORK_QUERY, postgresWorkOf, type PostgresWorkRow } from '../postgres-work.js';

/** pg-boss refuses polling intervals under half a second. */
const POLLING_INTERVAL_SECONDS = 0.5;
/**
 * Largest `batchSize` of one `work()` loop; the harness's concurrency takes as few loops as fit.
 * Fewer, fuller fetches drain a backlog faster: measured on this machine with 10,000 jobs
 * backlogged and 16 at once, 1 loop × 16 ran ~600 jobs/s, 2 × 8 ~500, 4 × 4 ~440, 16 × 1 ~150.
 */
const MAX_BATCH_SIZE = 50;
/** Connections of pg-boss's pool (its default is 10). */
const POOL_SIZE = 10;
/** pg-boss priorities: higher runs first, 0 is the default. */
const PRIORITY = { high: 10, low: 0 } as const;
/** How long teardown waits for completions pg-boss sends without awaiting them. */
const SETTLE_TIMEOUT_MS = 10_000;

/** The adapter, with what a test needs to check that teardown left nothing behind. */
export interface PgBossSystem extends QueueSystem {
  /** The run's database (set by `setup`, dropped by `teardown`). */
  readonly databaseName: string | undefined;
}

export function createPgBoss(options: { batched: boolean }): PgBossSystem {
  let database: TestDatabase | undefined;
  let boss: PgBoss | undefined;
  let queueName = '';
  let serverVersion = 'unknown';

  const ready = (): PgBoss => {
    if (!boss) throw new Error('pg-boss: setup() first');
    return boss;
  };
  const sendOptions = (job: Job): PgBoss.SendOptions =>
    job.priority === undefined ? {} : { priority: PRIORITY[job.priority] };

  return {
    name: 'pg-boss',
    durability: 'fsync per commit',
    batched: options.batched,
    get databaseName() {
      return database?.name;
    },

    async setup() {
      database = await createTestDatabase();
      boss = new PgBoss({
        connectionString: database.url,
        max: POOL_SIZE,
        // No cron schedules in this workload: the scheduler would only add polling of its own.
        schedule: false,
      });
      // An 'error' event without a listener would crash the process; report it instead.
      boss.on('error', (error) => console.error(`pg-boss: ${error.message}`));
      await boss.start();
      queueName = `sluice_bench_${runSuffix()}`;
      await boss.createQueue(queueName);
      const { rows } = await boss.getDb().executeSql('show server_version', []);
      const row = rows[0] as { server_version?: unknown } | undefined;
      serverVersion = typeof row?.server_version === 'string' ? row.server_version : 'unknown';
    },

    async enqueue(jobs: readonly Job[]) {
      const b = ready();
      if (!options.batched) {
        await forEachBounded(jobs, ONE_AT_A_TIME_IN_FLIGHT, async (job) => {
          const id = await b.send(queueName, toPayload(job), sendOptions(job));
          if (id === null) throw new Error(`pg-boss refused job ${job.id}`);
        });
        return;
      }
      await forEachBounded(chunks(jobs, PEER_BATCH), BATCHES_IN_FLIGHT, async (slice) => {
        await b.insert(
          slice.map((job) => ({
            name: queueName,
            data: toPayload(job),
            ...(job.priority === undefined ? {} : { priority: PRIORITY[job.priority] }),
          })),
        );
      });
    },

    async startWorkers(start: StartOptions) {
      const b = ready();
      const concurrency = Math.max(1, start.concurrency);
      const workers = Math.ceil(concurrency / MAX_BATCH_SIZE);
      const batchSize = Math.ceil(concurrency / workers);
      for (let i = 0; i < workers; i += 1) {
        // Its id is known once work() resolves, which is before its first fetch comes back.
        const self: { id?: string } = {};
        self.id = await b.work<PeerPayload>(
          queueName,
          { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_SECONDS },
          async (batch) => {
            // A full batch: more are probably waiting, so fetch again without the polling pause.
            if (batch.length === batchSize && self.id !== undefined) b.notifyWorker(self.id);
            await Promise.all(batch.map((job) => start.handler(fromPayload(job.data))));
          },
        );
      }
    },

    async teardown() {
      try {
        if (boss) {
          const b = boss;
          await b.offWork(queueName);
          // pg-boss completes a batch without awaiting it; let those land before the pool closes.
          const deadline = Date.now() + SETTLE_TIMEOUT_MS;
          while (Date.now() < deadline && (await activeJobs(b, queueName)) > 0) {
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          await b.stop({ graceful: true, wait: true, timeout: 5_000 });
        }
      } finally {
        boss = undefined;
        await database?.drop();
      }
    },

    // pg-boss 10 emits no completion event and completes without awaiting it; what it records is
    // the job's `completed_on` (the completing statement's time on the Postgres clock), also what
    // its `getJobById` returns. Read for the whole queue at once rather than a call per job.
    watchCompletions() {
      const b = ready();
      const watch: CompletionWatch = {
        async completions(ids, timeoutMs) {
          const wanted = new Set(ids);
          const found = new Map<string, number>();
          const deadline = Date.now() + timeoutMs;
          for (;;) {
            for (const [id, at] of await completedJobs(b, queueName)) {
              if (wanted.has(id)) found.set(id, at);
            }
            if (found.size >= wanted.size || Date.now() >= deadline) return found;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        },
        stop: () => Promise.resolve(),
      };
      return Promise.resolve(watch);
    },

    async versions() {
      return { 'pg-boss': await packageVersion('pg-boss'), postgres: serverVersion };
    },

    async postgresWork() {
      const { rows } = await ready().getDb().executeSql(POSTGRES_WORK_QUERY, []);
      return postgresWorkOf((rows as PostgresWorkRow[])[0]);
    },

    async processes() {
      const { rows } = await ready().getDb().executeSql(POSTGRES_BACKENDS_QUERY, []);
      return postgresBackends(rows as Array<{ pid: unknown }>);
    },
  };
}

/** Jobs of `queue` a worker holds (fetched, not yet completed or failed). */
async function activeJobs(boss: PgBoss, queue: string): Promise<number> {
  const { rows } = await boss
    .getDb()
    .executeSql(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = $1 AND state = 'active'`, [
      queue,
    ]);
  const row = rows[0] as { n?: unknown } | undefined;
  return typeof row?.n === 'number' ? row.n : 0;
}

/** The harness id and `completed_on` (epoch ms) of every completed job of `queue`. */
async function completedJobs(boss: PgBoss, queue: string): Promise<Map<string, number>> {
  const { rows } = await boss.getDb().executeSql(
    `SELECT data->>'id' AS id, (extract(epoch FROM completed_on) * 1000)::float8 AS at
       FROM pgboss.job WHERE name = $1 AND state = 'completed'`,
    [queue],
  );
  const out = new Map<string, number>();
  for (const row of rows as Array<{ id?: unknown; at?: unknown }>) {
    if (typeof row.id === 'string' && typeof row.at === 'number') out.set(row.id, row.at);
  }
  return out;
}

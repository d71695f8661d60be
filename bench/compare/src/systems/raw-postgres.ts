/**
 * The floor of a durable store (issue 7): a Postgres loop of one insert and one update per task on
 * the machine's Postgres (commits wait for the disk). Two variants, reported apart:
 * - `raw-postgres`: one job per statement, each statement its own commit;
 * - `raw-postgres-batched`: 500 rows per statement, one commit per statement.
 * The update claims and completes a job in one statement (`for update skip locked`); the handler is
 * called for each row it returns, after the commit — the cheapest correct-once loop there is.
 * Runs in a fresh database, dropped at teardown.
 */
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import postgres from 'postgres';
import { CompletionLog } from '../completion-log.js';
import { chunks, forEachBounded } from '../pool.js';
import type { Job, QueueSystem, StartOptions } from '../system.js';
import { packageVersion } from '../versions.js';
import { POSTGRES_BACKENDS_QUERY, postgresBackends } from './footprint-processes.js';
import { POSTGRES_WORK_QUERY, postgresWorkOf, type PostgresWorkRow } from '../postgres-work.js';

/** Rows per statement of the batched variant. */
export const RAW_POSTGRES_BATCH = 500;
/** Connections of the pool: as many workers claim rows at once (2 cores: more only contend). */
const CONNECTIONS = 8;
/** How long an idle worker waits before it looks for rows again. */
const IDLE_POLL_MS = 5;

type Sql = ReturnType<typeof postgres>;

export function createRawPostgres(options: { batched: boolean }): QueueSystem {
  const batch = options.batched ? RAW_POSTGRES_BATCH : 1;
  let database: TestDatabase | undefined;
  let sql: Sql | undefined;
  let stopping = false;
  let workerError: Error | undefined;
  const loops: Promise<void>[] = [];
  let completed: CompletionLog | undefined;

  const connection = (): Sql => {
    if (!sql) throw new Error('raw-postgres: setup() first');
    return sql;
  };

  return {
    name: 'raw-postgres',
    durability: 'fsync per commit',
    batched: options.batched,

    async setup() {
      database = await createTestDatabase();
      sql = postgres(database.url, { max: CONNECTIONS, onnotice: () => undefined });
      await sql`create table jobs (
        seq bigint generated always as identity primary key,
        id text not null unique,
        done boolean not null default false
      )`;
      await sql`create index jobs_todo on jobs (seq) where not done`;
    },

    async enqueue(jobs: readonly Job[]) {
      const db = connection();
      if (batch === 1) {
        await forEachBounded(jobs, CONNECTIONS * 4, async (job) => {
          await db`insert into jobs (id) values (${job.id})`;
        });
        return;
      }
      await forEachBounded(chunks(jobs, batch), CONNECTIONS, async (slice) => {
        await db`insert into jobs (id) select unnest(${slice.map((j) => j.id)}::text[])`;
      });
    },

    startWorkers(start: StartOptions) {
      const db = connection();
      const workers = Math.max(1, Math.min(start.concurrency, CONNECTIONS));
      for (let i = 0; i < workers; i += 1) {
        loops.push(
          (async () => {
            while (!stopping) {
              const rows = await db<{ id: string }[]>`
                update jobs set done = true
                where seq in (
                  select seq from jobs where not done order by seq limit ${batch}
                  for update skip locked)
                returning id`;
              if (rows.length === 0) {
                await new Promise((resolve) => setTimeout(resolve, IDLE_POLL_MS));
                continue;
              }
              await Promise.all(rows.map((row) => start.handler({ id: row.id })));
              // The update committed before the handlers ran; the job is done once they resolved.
              for (const row of rows) completed?.record(row.id);
            }
          })().catch((error: unknown) => {
            // The run then misses jobs and fails; teardown reports why.
            workerError ??= error instanceof Error ? error : new Error(String(error));
          }),
        );
      }
      return Promise.resolve();
    },

    async teardown() {
      stopping = true;
      await Promise.allSettled(loops);
      await sql?.end({ timeout: 5 });
      await database?.drop();
      if (workerError !== undefined) throw workerError;
    },

    watchCompletions() {
      completed = new CompletionLog();
      return Promise.resolve(completed);
    },

    async versions() {
      const [row] = sql
        ? await sql<{ v: string }[]>`select current_setting('server_version') as v`
        : [];
      return { postgres: row?.v ?? 'unknown', 'postgres.js': await packageVersion('postgres') };
    },

    async postgresWork() {
      return postgresWorkOf((await connection().unsafe<PostgresWorkRow[]>(POSTGRES_WORK_QUERY))[0]);
    },

    async processes() {
      return postgresBackends(
        await connection().unsafe<{ pid: number }[]>(POSTGRES_BACKENDS_QUERY),
      );
    },
  };
}

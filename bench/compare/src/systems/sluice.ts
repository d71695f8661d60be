/**
 * Sluice through its public API (issue 7): the whole stack as separate processes (gateway,
 * scheduler, governor, one executor of `tool:bench`; test/support/e2e-stack.ts) on the machine's
 * NATS and Postgres, a fresh database and NATS prefix per run. Jobs are `bench-noop` tasks created
 * one `CreateTask` at a time through the SDK client, concurrently (`sluice-batched`: 500 per
 * `CreateTasks` call, as the peers' batched variants), each with its job id as the idempotency key
 * (a retried create cannot duplicate it). The executor is started only by
 * `startWorkers`, so `enqueue` fills a backlog; the step reports each start over a loopback
 * connection to the report server here, which calls the harness's handler (start-reports.ts). The stack and
 * the type registration are imported by path from test/ and services/ (not public packages). Each
 * service preloads live-heap-probe.mjs, idle until the footprint asks for its live heap.
 */
import { execFileSync } from 'node:child_process';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { registerTaskType } from '@sluice/db';
import { adminDatabaseUrl } from '@sluice/db/testing';
import { isServiceError, type CreateTaskParams } from '@sluice/sdk/client';
import { closeNats, connectNats, createBusCatalog, decodeMessageOf } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import postgres from 'postgres';
import { startE2eStack, type E2eStack } from '../../../../test/support/e2e-stack.js';
import { CompletionLog } from '../completion-log.js';
import { epochNow } from '../latency.js';
import { chunks, forEachBounded } from '../pool.js';
import { BATCHES_IN_FLIGHT, PEER_BATCH } from './peer-job.js';
import {
  machineNatsServer,
  POSTGRES_BACKENDS_QUERY,
  postgresBackends,
} from './footprint-processes.js';
import { POSTGRES_WORK_QUERY, postgresWorkOf, type PostgresWorkRow } from '../postgres-work.js';
import type { Job, JobHandler, LiveHeap, QueueSystem, StartOptions } from '../system.js';
import { packageVersion } from '../versions.js';
import { manifestOf } from '../../../../services/executor/src/task-registry.js';
import { BENCH_RESOURCE, BENCH_TASK_TYPE, benchNoop } from './sluice-task-types.js';
import { REPORT_ADDRESS_VARIABLE, startReportServer, type ReportServer } from './start-reports.js';
import { sluiceStackSettings } from './sluice-settings.js';
import { liveHeapProbeOptions, readLiveHeap } from './live-heap.js';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const TASK_MODULE = fileURLToPath(new URL('./sluice-task-types.ts', import.meta.url));
/** CreateTask calls in flight at once. */
export const CREATES_IN_FLIGHT = 64;
const RESOURCE_EXHAUSTED = 8;
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;
/** Retries of one create (same idempotency key) before the run fails. */
const MAX_CREATE_ATTEMPTS = 50;
/** The harness's priorities as Sluice's: high jumps the queue, low waits behind the default. */
const PRIORITY = { high: 'PRIORITY_P0', low: 'PRIORITY_P3' } as const;

export interface SluiceSystemOptions {
  /** Create 500 tasks per `CreateTasks` call instead of one per `CreateTask`. */
  readonly batched: boolean;
  /** Steps the executor runs at once (`SLUICE_EXECUTOR_SLOTS`); the stack is configured at setup. */
  readonly slots: number;
  /** Print the services' output (debugging). */
  readonly echo?: boolean;
}

export function createSluice(options: SluiceSystemOptions): QueueSystem & {
  /** Creates answered RESOURCE_EXHAUSTED or UNAVAILABLE and retried with the same key. */
  readonly retriedCreates: () => number;
} {
  let e2e: E2eStack | undefined;
  let reports: ReportServer | undefined;
  let handler: JobHandler | undefined;
  let retried = 0;
  let completions: TaskCompletions | undefined;

  const running = (): E2eStack => {
    if (!e2e) throw new Error('sluice: setup() first');
    return e2e;
  };

  return {
    name: 'sluice',
    durability: 'fsync per commit',
    batched: options.batched,
    retriedCreates: () => retried,

    async setup() {
      reports = await startReportServer((id, startedAt) =>
        handler?.(startedAt === undefined ? { id } : { id, startedAt }),
      );
      e2e = await startE2eStack({
        label: 'bench-compare',
        resources: [],
        echo: options.echo,
        env: {
          ...sluiceStackSettings(process.env),
          SLUICE_TASK_MODULES: TASK_MODULE,
          SLUICE_EXECUTOR_SLOTS: String(options.slots),
          [REPORT_ADDRESS_VARIABLE]: reports.address,
          // Idle until the footprint scenario signals a service (liveHeaps below).
          NODE_OPTIONS: liveHeapProbeOptions(),
        },
      });
      // An executor registers its task types when it starts; none runs yet, so register the type
      // as it would (a deployment whose workers are stopped has it registered from before).
      await registerTaskType(e2e.handle.db, manifestOf(benchNoop));
    },

    async enqueue(jobs: readonly Job[]) {
      const { client } = running();
      const createOf = (job: Job): CreateTaskParams => ({
        type: BENCH_TASK_TYPE,
        priority: job.priority === undefined ? 'PRIORITY_P2' : PRIORITY[job.priority],
        input: { job_id: job.id },
        idempotencyKey: job.id,
      });
      /** Calls `create` until it succeeds, again after a transient refusal (same keys). */
      const withRetries = async (create: () => Promise<void>) => {
        for (let attempt = 1; ; attempt += 1) {
          try {
            return await create();
          } catch (error) {
            const code = isServiceError(error) ? Number(error.code) : undefined;
            const transient =
              code === RESOURCE_EXHAUSTED || code === UNAVAILABLE || code === DEADLINE_EXCEEDED;
            if (!transient || attempt >= MAX_CREATE_ATTEMPTS) throw error;
            retried += 1;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      };
      if (options.batched) {
        await forEachBounded(chunks(jobs, PEER_BATCH), BATCHES_IN_FLIGHT, (batch) =>
          withRetries(async () => {
            const results = await client.createTasks(batch.map(createOf));
            if (results.length !== batch.length) {
              throw new Error(`CreateTasks answered ${results.length} of ${batch.length} tasks`);
            }
            results.forEach(({ task }, i) => completions?.taskCreated(task.task_id, batch[i]!.id));
          }),
        );
        return;
      }
      await forEachBounded(jobs, CREATES_IN_FLIGHT, (job) =>
        withRetries(async () => {
          const { task } = await client.createTask(createOf(job));
          completions?.taskCreated(task.task_id, job.id);
        }),
      );
    },

    async startWorkers(start: StartOptions) {
      if (start.concurrency !== options.slots) {
        throw new Error(
          `sluice: the stack was set up with ${options.slots} slots, not ${start.concurrency}`,
        );
      }
      handler = start.handler;
      await running().stack.startExecutor(BENCH_RESOURCE);
    },

    async teardown() {
      handler = undefined;
      try {
        await e2e?.stop();
      } finally {
        e2e = undefined;
        await reports?.close();
        reports = undefined;
      }
    },

    async watchCompletions() {
      const { prefix } = running();
      completions = await watchTaskCompletions(prefix);
      return completions;
    },

    async versions() {
      const [row] = await running().handle.sql<
        { v: string }[]
      >`select current_setting('server_version') as v`;
      return {
        sluice: sluiceVersion(),
        postgres: row?.v ?? 'unknown',
        '@sluice/sdk': await packageVersion('@sluice/sdk'),
      };
    },

    async postgresWork() {
      return postgresWorkOf(
        (await running().handle.sql.unsafe<PostgresWorkRow[]>(POSTGRES_WORK_QUERY))[0],
      );
    },

    async processes() {
      const { stack, handle } = running();
      // Each service with its descendants (an esbuild process, where tsx loads an executor's task
      // modules); an executor is named by its resource and start order: one role for all.
      const services = stack.all.flatMap((service) =>
        service.pid === undefined
          ? []
          : [
              {
                role: service.options.service,
                pid: service.pid,
                withDescendants: true,
                runsWorkers: service.options.service === 'executor',
              },
            ],
      );
      // Not the connection asking: it is the harness's (registering the type, reading versions).
      const backends = await handle.sql.unsafe<{ pid: number }[]>(
        `${POSTGRES_BACKENDS_QUERY} and pid <> pg_backend_pid()`,
      );
      return [...services, ...postgresBackends(backends), ...(await machineNatsServer())];
    },

    async liveHeaps() {
      // By the roles processes() names: each running service, executors summed.
      const services = running().stack.all.filter((service) => service.running);
      const heaps = await Promise.all(services.map(readLiveHeap));
      const byRole = new Map<string, LiveHeap>();
      services.forEach((service, i) => {
        const role = service.options.service;
        const sum = byRole.get(role);
        const heap = heaps[i]!;
        byRole.set(role, {
          heapUsedBytes: (sum?.heapUsedBytes ?? 0) + heap.heapUsedBytes,
          rssBytes: (sum?.rssBytes ?? 0) + heap.rssBytes,
        });
      });
      return byRole;
    },
  };
}

/** The commit under test (with `+dirty` for uncommitted changes), or `unknown` outside git. */
export function sluiceVersion(): string {
  try {
    const run = (args: string[]) =>
      execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: 'pipe' }).trim();
    const dirty = run(['status', '--porcelain', '--untracked-files=no']).length > 0;
    return `${run(['rev-parse', '--short', 'HEAD'])}${dirty ? '+dirty' : ''}`;
  } catch {
    return 'unknown';
  }
}

/**
 * Drops the migrated template database this process built for its Sluice stacks (tests leave
 * that to the test runner, which drops the run's databases).
 */
export async function dropOwnTemplates(): Promise<void> {
  if (process.env.SLUICE_TEST_RUN_ID) return;
  const sql = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
  try {
    const rows = await sql<{ name: string }[]>`
      select datname as name from pg_database
      where datname like 'sluice\_tpl\_%'
        and shobj_description(oid, 'pg_database') like '{%'
        and (shobj_description(oid, 'pg_database')::jsonb ->> 'pid') = ${String(process.pid)}
        and (shobj_description(oid, 'pg_database')::jsonb ->> 'host') = ${hostname()}`;
    for (const { name } of rows) {
      if (/^[a-z0-9_]+$/.test(name))
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
    }
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Completions of Sluice tasks, by the harness's job ids. */
class TaskCompletions extends CompletionLog {
  private readonly jobOfTask = new Map<string, string>();
  /** Completions of tasks whose create had not answered yet: task id → time. */
  private readonly early = new Map<string, number>();

  /** Tells which job a created task runs (its `complete` event names the task only). */
  taskCreated(taskId: string, jobId: string): void {
    this.jobOfTask.set(taskId, jobId);
    const at = this.early.get(taskId);
    if (at !== undefined) {
      this.early.delete(taskId);
      this.record(jobId, at);
    }
  }

  taskCompleted(taskId: string, at: number): void {
    const jobId = this.jobOfTask.get(taskId);
    if (jobId === undefined) this.early.set(taskId, at);
    else this.record(jobId, at);
  }
}

/**
 * Observes completions through Sluice's public task events (docs/events.md): one plain NATS
 * subscription to `<prefix>.events.>`, where the event relay publishes each recorded event; a
 * task's `complete` event is its completion, timed when it reaches the harness (so the relay's
 * delay is included, as for any subscriber).
 */
async function watchTaskCompletions(prefix: string): Promise<TaskCompletions> {
  const nc = await connectNats({ url: natsUrl(), name: `bench-sluice-completions-${prefix}` });
  const log = new TaskCompletions(() => closeNats(nc));
  nc.subscribe(createBusCatalog(prefix).subjects.eventsAll, {
    callback: (error, message) => {
      if (error) return;
      const at = epochNow();
      try {
        const notice = decodeMessageOf('task.event', message.subject, message.data);
        if (notice.event === 'complete') log.taskCompleted(notice.task_id, at);
      } catch {
        // Not an event notice: nothing this watch counts (a missing completion shows as such).
      }
    },
  });
  // The subscription is registered with the server before the first task is created.
  await nc.flush();
  return log;
}

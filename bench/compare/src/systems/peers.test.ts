import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { adminDatabaseUrl } from '@sluice/db/testing';
import postgres from 'postgres';
import type { Job, QueueSystem } from '../system.js';
import { createBullmq, type BullmqSystem } from './bullmq.js';
import { createGraphileWorker } from './graphile.js';
import { createPgBoss } from './pg-boss.js';

const run = promisify(execFile);
const COUNT = 100;
/** Generous: a healthy run of 100 no-op jobs takes well under a second on every peer. */
const DRAIN_TIMEOUT_MS = 30_000;

/** `count` jobs of `system`, a third high priority, a third low, a third without; all stamped. */
function jobsFor(system: QueueSystem, count: number): Job[] {
  const now = performance.timeOrigin + performance.now();
  return Array.from({ length: count }, (_, i): Job => {
    const id = `${system.name}-${system.batched ? 'b' : 'u'}-${i}`;
    if (i % 3 === 0) return { id, priority: 'high', scheduledAt: now + i };
    if (i % 3 === 1) return { id, priority: 'low', scheduledAt: now + i };
    return { id };
  });
}

interface Outcome {
  /** Handler starts per id. */
  readonly starts: Map<string, number>;
  /** Ids in the order their handler started. */
  readonly order: string[];
  /** Jobs as the handler received them. */
  readonly received: Map<string, Job>;
}

/**
 * Enqueues `jobs` before any worker runs, starts workers, waits until every id was handled, then
 * tears down (which stops the workers, so any duplicate start happened before `starts` is read).
 * `during` runs while the system is set up, for checks of its live state.
 */
async function drain(
  system: QueueSystem,
  jobs: readonly Job[],
  concurrency: number,
  during?: () => Promise<void>,
): Promise<Outcome> {
  const starts = new Map<string, number>();
  const order: string[] = [];
  const received = new Map<string, Job>();
  await system.setup();
  try {
    await system.enqueue(jobs);
    let allSeen!: () => void;
    const seen = new Promise<void>((resolve) => (allSeen = resolve));
    await system.startWorkers({
      concurrency,
      handler: async (job) => {
        starts.set(job.id, (starts.get(job.id) ?? 0) + 1);
        order.push(job.id);
        received.set(job.id, job);
        if (starts.size === jobs.length) allSeen();
        await Promise.resolve();
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${system.name}: ${starts.size} of ${jobs.length} handled`)),
        DRAIN_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([seen, timeout]);
    } finally {
      clearTimeout(timer);
    }
    await during?.();
  } finally {
    await system.teardown();
  }
  return { starts, order, received };
}

function assertExactlyOnce(jobs: readonly Job[], outcome: Outcome): void {
  assert.equal(outcome.starts.size, jobs.length, 'every job handled');
  for (const job of jobs) {
    assert.equal(outcome.starts.get(job.id), 1, `${job.id} handled exactly once`);
    assert.deepEqual(outcome.received.get(job.id), job, `${job.id} arrives as it was sent`);
  }
  assert.equal(outcome.order.length, jobs.length, 'no other handler starts');
}

/** With one job at a time and a full backlog, every high-priority job starts before any low one. */
function assertHighFirst(jobs: readonly Job[], outcome: Outcome): void {
  const priority = new Map(jobs.map((job) => [job.id, job.priority]));
  const lastHigh = outcome.order.findLastIndex((id) => priority.get(id) === 'high');
  const firstLow = outcome.order.findIndex((id) => priority.get(id) === 'low');
  assert.ok(lastHigh >= 0 && firstLow >= 0);
  assert.ok(
    lastHigh < firstLow,
    `high priority first (last high ${lastHigh}, first low ${firstLow})`,
  );
}

async function redisKeys(port: number, pattern: string): Promise<string[]> {
  const { stdout } = await run('redis-cli', ['-p', String(port), '--scan', '--pattern', pattern]);
  return stdout.split('\n').filter((line) => line.length > 0);
}

async function databaseExists(name: string): Promise<boolean> {
  const sql = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
  try {
    const rows = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
    return rows.length === 1;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Checks of a BullMQ run: its keys while it runs, none after; the private server gone. */
async function bullmqRun(system: BullmqSystem, jobs: readonly Job[], concurrency: number) {
  let queueName = '';
  let port = 0;
  let server: { pid: number; dir: string } | undefined;
  const outcome = await drain(system, jobs, concurrency, async () => {
    queueName = system.queueName ?? '';
    port = system.redis?.port ?? 0;
    assert.ok((await redisKeys(port, `bull:${queueName}:*`)).length > 0, 'queue keys exist');
    const own = system.privateServer;
    if (own) {
      server = { pid: own.pid, dir: own.dir };
      const { stdout } = await run('redis-cli', ['-p', String(port), 'config', 'get', 'app*']);
      assert.match(stdout, /appendonly\nyes/);
      assert.match(stdout, /appendfsync\neverysec/);
    }
  });
  if (system.durability === 'AOF fsync every second') {
    assert.ok(server, 'the AOF tier runs its own server');
    assert.notEqual(port, 6379);
    assert.equal(processAlive(server.pid), false, 'private redis-server stopped');
    assert.equal(existsSync(server.dir), false, 'its data directory removed');
  } else {
    assert.equal(port, 6379, 'the memory tier uses the machine Redis');
    assert.deepEqual(await redisKeys(port, `bull:${queueName}:*`), [], 'queue obliterated');
  }
  return outcome;
}

describe('BullMQ adapter', () => {
  for (const aof of [false, true]) {
    for (const batched of [false, true]) {
      it(`${aof ? 'AOF' : 'memory'} tier, ${batched ? 'addBulk' : 'add'}: each job once, nothing left`, async () => {
        const system = createBullmq({ aof, batched });
        assert.equal(system.name, aof ? 'bullmq-aof' : 'bullmq');
        const jobs = jobsFor(system, COUNT);
        assertExactlyOnce(jobs, await bullmqRun(system, jobs, 8));
        const versions = await system.versions();
        assert.match(versions.bullmq ?? '', /^5\.\d+\.\d+$/);
        assert.match(versions.redis ?? '', /^\d+\.\d+/);
      });
    }
  }

  it('runs high-priority jobs before low ones', async () => {
    const system = createBullmq({ aof: false, batched: true });
    const jobs = jobsFor(system, 30);
    assertHighFirst(jobs, await bullmqRun(system, jobs, 1));
  });
});

describe('pg-boss adapter', () => {
  for (const batched of [false, true]) {
    it(`${batched ? 'insert' : 'send'}: each job once, database dropped`, async () => {
      const system = createPgBoss({ batched });
      const jobs = jobsFor(system, COUNT);
      let database = '';
      const outcome = await drain(system, jobs, 8, async () => {
        database = system.databaseName ?? '';
        assert.equal(await databaseExists(database), true);
      });
      assertExactlyOnce(jobs, outcome);
      assert.equal(await databaseExists(database), false, 'database dropped');
      const versions = await system.versions();
      assert.match(versions['pg-boss'] ?? '', /^10\.\d+\.\d+$/);
      assert.match(versions.postgres ?? '', /^\d+/);
    });
  }

  it('runs high-priority jobs before low ones', async () => {
    const system = createPgBoss({ batched: true });
    const jobs = jobsFor(system, 30);
    assertHighFirst(jobs, await drain(system, jobs, 1));
  });
});

describe('Graphile Worker adapter', () => {
  for (const batched of [false, true]) {
    it(`${batched ? 'add_jobs' : 'addJob'}: each job once, database dropped`, async () => {
      const system = createGraphileWorker({ batched });
      const jobs = jobsFor(system, COUNT);
      let database = '';
      const outcome = await drain(system, jobs, 8, async () => {
        database = system.databaseName ?? '';
        assert.equal(await databaseExists(database), true);
      });
      assertExactlyOnce(jobs, outcome);
      assert.equal(await databaseExists(database), false, 'database dropped');
      const versions = await system.versions();
      assert.match(versions['graphile-worker'] ?? '', /^0\.16\.\d+$/);
      assert.match(versions.postgres ?? '', /^\d+/);
    });
  }

  it('runs high-priority jobs before low ones', async () => {
    const system = createGraphileWorker({ batched: true });
    const jobs = jobsFor(system, 30);
    assertHighFirst(jobs, await drain(system, jobs, 1));
  });
});

/**
 * A service whose start waits says so: every service, started as a real process, logs the start-up
 * step it is in while the step lasts longer than `SLUICE_STARTUP_REPORT_MS` — here first the
 * migration, held up by the migration lock this test holds, then the first NATS connect, to a port
 * where no server listens. Without these lines a stuck start printed nothing at all (a CI run saw a
 * gateway silent for 60 s and could not tell where it was).
 */
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { uniquePrefix } from '@sluice/bus/testing';
import { MIGRATION_LOCK_KEY, migrateDatabase, openDatabase } from '@sluice/db';
import { createTestDatabase, migratedTemplate } from '@sluice/db/testing';
import { ensureServiceBundles } from '@sluice/service-bundles';
import { ServiceProcess, type LogLine } from '../support/service-process.js';

/** Where nothing listens (the discard port): the first NATS connect waits on and on. */
const NO_NATS_URL = 'nats://127.0.0.1:9';
/** Short, so that each step is reported within a fraction of a second. */
const REPORT_MS = 200;

interface Case {
  readonly service: 'gateway' | 'scheduler' | 'executor' | 'governor';
  readonly args: readonly string[];
  /** The name in the service's lines (`executor-<resource>` for an executor). */
  readonly name: string;
}

const CASES: readonly Case[] = [
  { service: 'gateway', args: [], name: 'gateway' },
  { service: 'scheduler', args: [], name: 'scheduler' },
  { service: 'executor', args: ['--resource', 'llm'], name: 'executor-llm' },
  { service: 'governor', args: [], name: 'governor' },
];

let template: string;
before(async () => {
  await ensureServiceBundles();
  template = await migratedTemplate(migrateDatabase);
});

/** Every process this file started, killed in `after` whatever happened. */
const started = new Set<ServiceProcess>();
after(() => {
  for (const process of started) process.kill('SIGKILL');
});

/** The service's report of `stage`: a warning with the step and how long it has lasted. */
function reportOf(name: string, stage: string): (line: LogLine) => boolean {
  return (line) =>
    line.msg === `${name} is still starting: ${stage}` &&
    line['level'] === 'warn' &&
    line['stage'] === stage &&
    typeof line['stage_ms'] === 'number' &&
    typeof line['startup_ms'] === 'number';
}

/** Polls `probe` until it holds; fails after 30 s naming `what`. */
async function waitUntil(probe: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(20);
  }
}

describe('a slow start says which step it waits in', { concurrency: 2 }, () => {
  for (const c of CASES) {
    it(`${c.name}: the migration lock, then the first NATS connect`, async () => {
      await using database = await createTestDatabase({ template });
      // One connection: the session that takes the lock is the one that gives it back.
      const holder = openDatabase(database.url, { max: 1 });
      const lockHolder = holder.sql;
      const service = new ServiceProcess({
        name: c.name,
        service: c.service,
        args: c.args,
        env: {
          NATS_URL: NO_NATS_URL,
          DATABASE_URL: database.url,
          SLUICE_PREFIX: uniquePrefix('startup_report'),
          SLUICE_GRPC_PORT: '0',
          SLUICE_LLM_BASE_URL: 'http://127.0.0.1:9/v1',
          SLUICE_STARTUP_REPORT_MS: String(REPORT_MS),
        },
      });
      try {
        // Held before the service starts, so its migration waits for it.
        await lockHolder`select pg_advisory_lock(${MIGRATION_LOCK_KEY.toString()}::bigint)`;
        started.add(service);
        await service.waitForLine(reportOf(c.name, 'migrating the database'));
        // The report comes at the interval, its session may still be on its way to the lock.
        await waitUntil(async () => {
          const [waiter] = await lockHolder<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where datname = current_database() and application_name = 'sluice-migrate'
              and wait_event_type = 'Lock' and wait_event = 'advisory'`;
          return waiter?.n === 1;
        }, 'the service waits for the migration lock, its session named');

        await lockHolder`select pg_advisory_unlock(${MIGRATION_LOCK_KEY.toString()}::bigint)`;
        const connecting = await service.waitForLine(reportOf(c.name, 'connecting to NATS'));
        assert.ok(
          Number(connecting['startup_ms']) > Number(connecting['stage_ms']),
          'the whole start took longer than its NATS step',
        );
        assert.ok(service.running, 'still starting, not failed');
        assert.equal(
          service.lines.some((line) => line.msg === `${c.name} started`),
          false,
        );
      } finally {
        await service.stop();
        started.delete(service);
        await holder.close();
      }
    });
  }
});

/**
 * Ctrl-C (or SIGTERM) during `npm run bench:hops` closes the hop being timed before the process
 * exits, non-zero: before, Node's default ended the process at once, leaving the hop's test
 * database (or its JetStream stream) behind.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { adminDatabaseUrl } from '@sluice/db/testing';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** The test databases process `pid` created that still exist. */
async function databasesOf(sql: postgres.Sql, pid: number): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select datname as name from pg_database
    where shobj_description(oid, 'pg_database') like '{%'
      and (shobj_description(oid, 'pg_database')::jsonb ->> 'pid') = ${String(pid)}
      and (shobj_description(oid, 'pg_database')::jsonb ->> 'host') = ${hostname()}`;
  return rows.map((row) => row.name);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  test(`${signal} while a hop is timed drops its database and exits non-zero, printing no figures`, async () => {
    const admin = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
    // 1,000 idle passes 50 ms apart take 50 s: time enough to interrupt.
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', MAIN, '--hops', 'pg-read', '--count', '1000', '--gap-ms', '50'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const pid = child.pid!;
    try {
      const deadline = Date.now() + 60_000;
      while ((await databasesOf(admin, pid)).length === 0) {
        assert.ok(Date.now() < deadline, `the hop never opened:\n${stderr}`);
        await sleep(50);
      }
      child.kill(signal);
      const [code, killedBy] = await Promise.race([
        exited,
        sleep(60_000, undefined, { ref: false }).then(() =>
          assert.fail(`bench:hops did not exit after ${signal}:\n${stderr}`),
        ),
      ]);
      assert.equal(killedBy, null, `it handled the signal, not died of it:\n${stderr}`);
      assert.equal(code, signal === 'SIGTERM' ? 143 : 130, stderr);
      assert.deepEqual(await databasesOf(admin, pid), [], 'the hop dropped its database');
      assert.equal(stdout, '', 'no figures for an interrupted run');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await admin.end();
    }
  });
}

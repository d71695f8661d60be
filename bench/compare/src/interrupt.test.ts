/**
 * Ctrl-C (or SIGTERM) during `npm run bench` tears down the system under test before the bench
 * exits, non-zero: before, Node's default ended the process at once, leaving what the run had set
 * up (here raw-postgres's database; for others a NATS stream, Redis keys, a private redis-server,
 * child processes).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { adminDatabaseUrl, databaseUrlFor } from '@sluice/db/testing';

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

/** Whether the run in `database` has sent jobs: its table has rows. */
async function sending(database: string): Promise<boolean> {
  const sql = postgres(databaseUrlFor(adminDatabaseUrl(), database), {
    max: 1,
    onnotice: () => undefined,
  });
  try {
    const [row] = await sql<{ jobs: number }[]>`select count(*)::int as jobs from jobs`;
    return (row?.jobs ?? 0) > 0;
  } catch {
    return false; // Not set up yet.
  } finally {
    await sql.end();
  }
}

test('SIGINT mid-run tears down the system under test and exits non-zero, writing no report', async () => {
  const out = await mkdtemp(path.join(tmpdir(), 'sluice-bench-interrupt-'));
  const admin = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
  // idle-pickup sends a job every 100 ms: 50 take five seconds, time enough to interrupt.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', MAIN, 'idle-pickup', '--systems', 'raw-postgres', '--count', '50'].concat([
      '--out',
      out,
    ]),
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const pid = child.pid!;
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const [database] = await databasesOf(admin, pid);
      if (database !== undefined && (await sending(database))) break;
      assert.ok(Date.now() < deadline, `the run never started sending:\n${stderr}`);
      await sleep(100);
    }
    child.kill('SIGINT');
    const [code, signal] = await Promise.race([
      exited,
      sleep(60_000, undefined, { ref: false }).then(() =>
        assert.fail(`the bench did not exit after SIGINT:\n${stderr}`),
      ),
    ]);
    assert.equal(signal, null, `the bench handled the signal, not died of it:\n${stderr}`);
    assert.equal(code, 130, stderr);
    assert.deepEqual(await databasesOf(admin, pid), [], 'the run dropped its database');
    assert.deepEqual(await readdir(out), [], 'no report of the interrupted run');
  } finally {
    child.kill('SIGKILL');
    for (const name of await databasesOf(admin, pid)) {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
    }
    await admin.end();
    await rm(out, { recursive: true, force: true });
  }
});

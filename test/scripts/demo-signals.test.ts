/**
 * `npm run demo` cut short leaves no unfinished task behind: the demo shares its database with
 * `npm start`, whose executors would otherwise pick up steps whose fake LLM and web site are gone.
 * scripts/lib/process.mjs hands every terminating signal it gets (Ctrl-C, SIGTERM, a closed
 * terminal's SIGHUP) to the demo's whole process group, as the first test does; in a terminal
 * that closes, the demo also finds its output gone (EIO).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { migrateDatabase, openDatabase } from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { waitFor } from '../../scripts/lib/net.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEMO = ['--import', 'tsx', 'scripts/demo/main.ts'];

let template: string;
before(async () => {
  template = await migratedTemplate(migrateDatabase);
});

const prefixes: string[] = [];
after(async () => {
  for (const prefix of prefixes) await deletePrefixResources(natsUrl(), prefix);
});

/** The demo's environment: the run's NATS under a prefix of its own, and a fresh database. */
function demoEnv(database: TestDatabase): NodeJS.ProcessEnv {
  const prefix = uniquePrefix('demo_signals');
  prefixes.push(prefix);
  return {
    ...process.env,
    NATS_URL: natsUrl(),
    DATABASE_URL: database.url,
    SLUICE_PREFIX: prefix,
    NO_COLOR: '1',
  };
}

/**
 * Collects the output of `child` (started detached, so that it and its services are a group of
 * their own) and waits until the demo's batch has two tasks running; returns the output
 * so far.
 */
async function untilTasksRun(child: ChildProcess, sql: ReturnType<typeof openDatabase>['sql']) {
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw Object.assign(new Error(output), { fatal: true });
      if (!/1\. a batch/.test(output)) return false;
      // Two at least: one may be the batch's task the demo cancels at once itself, and with only
      // that one running the demo had nothing left to cancel at the signal (CI saw it once).
      const [row] = await sql<{ n: number }[]>`
        select count(*)::int as n from tasks where status = 'running'`;
      return (row?.n ?? 0) >= 2;
    },
    { what: 'running tasks of the demo', timeoutMs: 180_000, intervalMs: 100 },
  );
  return () => output;
}

/** The tasks the demo left for the next stack to run: not final, and no cancel requested. */
async function leftToRun(sql: ReturnType<typeof openDatabase>['sql']) {
  return [
    ...(await sql<{ id: string; status: string }[]>`
      select id, status from tasks
      where status not in ('succeeded', 'failed_terminal', 'cancelled') and not cancel_requested`),
  ];
}

function killGroup(pid: number | undefined): void {
  try {
    if (pid !== undefined) process.kill(-pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

test('SIGHUP while tasks run: the demo stops and cancels its unfinished tasks, exit 129', async () => {
  await using database = await createTestDatabase({ template });
  const handle = openDatabase(database.url, { max: 1 });
  const demo = spawn(process.execPath, DEMO, {
    cwd: REPO_ROOT,
    env: demoEnv(database),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = once(demo, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    const output = await untilTasksRun(demo, handle.sql);
    process.kill(-demo.pid!, 'SIGHUP');
    const [code, signal] = await exited;
    assert.equal(signal, null, `the demo died of ${signal}\n${output()}`);
    assert.equal(code, 129, output());
    assert.deepEqual(await leftToRun(handle.sql), [], 'tasks left to the next stack');
    assert.match(output(), /cancelled the \d+ unfinished task\(s\)/);
  } finally {
    killGroup(demo.pid);
    await handle.close();
  }
});

const hasScript = spawnSync('script', ['--version']).status === 0;

test(
  'its terminal closed while tasks run: the demo stops and cancels its unfinished tasks',
  { skip: hasScript ? false : 'no script(1) to give the demo a terminal' },
  async () => {
    await using database = await createTestDatabase({ template });
    const handle = openDatabase(database.url, { max: 1 });
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-demo-tty-'));
    const pidFile = path.join(dir, 'pid');
    // The demo on a terminal of its own (script's pseudo-terminal), whose end the test then
    // closes by killing script: the kernel hangs the terminal up, and the demo gets SIGHUP.
    const command = [process.execPath, ...DEMO].map((arg) => `'${arg}'`).join(' ');
    const terminal = spawn(
      'script',
      ['-qfec', `echo $$ > '${pidFile}'; exec ${command}`, '/dev/null'],
      {
        cwd: REPO_ROOT,
        env: demoEnv(database),
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      },
    );
    let demoPid: number | undefined;
    try {
      await untilTasksRun(terminal, handle.sql);
      demoPid = Number(readFileSync(pidFile, 'utf8'));
      terminal.kill('SIGKILL');
      await waitFor(
        () => {
          try {
            process.kill(demoPid!, 0);
            return Promise.resolve(false);
          } catch {
            return Promise.resolve(true);
          }
        },
        { what: 'the demo to end', timeoutMs: 60_000, intervalMs: 100 },
      );
      assert.deepEqual(await leftToRun(handle.sql), [], 'tasks left to the next stack');
    } finally {
      killGroup(terminal.pid);
      killGroup(demoPid);
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

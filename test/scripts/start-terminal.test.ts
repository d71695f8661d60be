/**
 * `npm start` in a terminal that closes (an ssh session that drops, a window closed): it gets
 * SIGHUP and finds its output gone (EIO). It must still stop every service cleanly, as on Ctrl-C,
 * rather than crash and leave them to its exit handler's SIGKILL (steps cut off mid-way).
 *
 * Node 20 itself then aborts at the very end (node::ResetStdio asserts on the hung-up terminal,
 * nodejs/node#51519), so the exit status says nothing; what the process wrote to stderr does.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { deletePrefixResources, natsUrl, uniquePrefix } from '@sluice/bus/testing';
import { migrateDatabase } from '@sluice/db';
import { createTestDatabase, migratedTemplate } from '@sluice/db/testing';
import { waitFor } from '../../scripts/lib/net.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const hasScript = spawnSync('script', ['--version']).status === 0;

let template: string;
before(async () => {
  template = await migratedTemplate(migrateDatabase);
});

const prefix = uniquePrefix('start_terminal');
after(async () => {
  await deletePrefixResources(natsUrl(), prefix);
});

test(
  'its terminal closed: npm start stops every service cleanly',
  { skip: hasScript ? false : 'no script(1) to give it a terminal' },
  async () => {
    await using database = await createTestDatabase({ template });
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-start-tty-'));
    const pidFile = path.join(dir, 'pid');
    const stderrFile = path.join(dir, 'stderr');
    // The stack on a terminal of its own (script's pseudo-terminal), whose end the test closes by
    // killing script: the kernel hangs the terminal up and sends the stack's process SIGHUP, and
    // its writes to stdout fail (EIO). Its stderr goes to a file, for the test to read.
    const start = ['--import', 'tsx', 'scripts/start/main.ts', '--resource', 'tool:http'];
    const command = [process.execPath, ...start].map((arg) => `'${arg}'`).join(' ');
    const terminal = spawn(
      'script',
      ['-qfec', `echo $$ > '${pidFile}'; exec ${command} 2> '${stderrFile}'`, '/dev/null'],
      {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          NATS_URL: natsUrl(),
          DATABASE_URL: database.url,
          SLUICE_PREFIX: prefix,
          SLUICE_GRPC_PORT: '0',
          NO_COLOR: '1',
        },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
      },
    );
    let output = '';
    terminal.stdout.on('data', (chunk) => (output += chunk));
    let pids: number[] = [];
    try {
      await waitFor(
        () => {
          if (terminal.exitCode !== null) throw Object.assign(new Error(output), { fatal: true });
          return Promise.resolve(output.includes('Sluice is running'));
        },
        { what: 'the stack to start', timeoutMs: 120_000, intervalMs: 100 },
      );
      const pid = Number(readFileSync(pidFile, 'utf8'));
      const services = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8');
      pids = [pid, ...services.trim().split(/\s+/).map(Number)];
      assert.equal(pids.length, 5, 'gateway, scheduler, governor and one executor');
      terminal.kill('SIGKILL');
      await waitFor(() => Promise.resolve(pids.every((p) => !isRunning(p))), {
        what: 'the stack to stop',
        timeoutMs: 60_000,
      });
      const stderr = readFileSync(stderrFile, 'utf8');
      // What it says when a service did not stop cleanly (SIGKILLed, say); or its own crash.
      assert.doesNotMatch(stderr, /ended: |Error: write EIO/, stderr);
    } finally {
      for (const pid of pids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
      try {
        process.kill(-terminal.pid!, 'SIGKILL');
      } catch {
        // Gone already.
      }
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

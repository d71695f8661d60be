/**
 * `node scripts/prepare.mjs` run alone keeps its private servers until it is told to stop; however
 * it is told (Ctrl-C, SIGTERM, a closed terminal's SIGHUP), the servers go with it: they run in
 * process groups of their own, so nothing else would end them.
 *
 * Only NATS is private here (DATABASE_URL names the run's Postgres), which keeps the test fast.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { canConnect, freePort, waitFor } from '../../scripts/lib/net.mjs';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Starts prepare.mjs with a private nats-server; resolves once it says the server runs. */
async function preparedWithPrivateNats() {
  const child = spawn(process.execPath, ['scripts/prepare.mjs'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      NATS_URL: '',
      // Nothing listens there, so prepare starts a nats-server of its own.
      SLUICE_DEFAULT_NATS_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = once(child, 'exit');
  await waitFor(
    () => {
      if (child.exitCode !== null) throw Object.assign(new Error(stderr), { fatal: true });
      return Promise.resolve(stderr.includes('Ctrl-C stops and removes them'));
    },
    { what: 'the private nats-server', timeoutMs: 120_000, intervalMs: 50 },
  );
  const port = Number(new URL(/^NATS_URL=(.*)$/m.exec(stdout)?.[1] ?? '').port);
  assert.ok(await canConnect('127.0.0.1', port), 'the private nats-server runs');
  return { child, port, exited, output: () => stderr };
}

async function assertServerGone(port: number, output: string) {
  assert.equal(await canConnect('127.0.0.1', port), false, `nats-server still runs\n${output}`);
  const store = path.join(REPO_ROOT, '.sluice', `nats-${port}`);
  assert.equal(existsSync(store), false, `${store} is still there`);
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  test(`${signal} stops and removes the private nats-server`, async () => {
    const { child, port, exited, output } = await preparedWithPrivateNats();
    try {
      child.kill(signal);
      await exited;
      await assertServerGone(port, output());
    } finally {
      child.kill('SIGKILL');
    }
  });
}

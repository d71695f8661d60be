/**
 * The process lifecycle of a service (runService) in a real child process: the signals that stop
 * it stop it cleanly, also while it is still starting.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const FIXTURE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'testing',
  'run-service-fixture.ts',
);

/** Runs the fixture, sends `signal` once it printed `when`, and resolves with how it ended. */
async function signalled(signal: NodeJS.Signals, when: string, startMs: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    env: { ...process.env, FIXTURE_START_MS: String(startMs) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let sent = false;
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (!sent && stdout.split('\n').includes(when)) {
      sent = true;
      child.kill(signal);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, lines: stdout.trim().split('\n'), stderr };
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  test(`${signal} stops a started service cleanly (exit 0)`, async () => {
    const ended = await signalled(signal, 'started', 0);
    assert.deepEqual(ended, { code: 0, lines: ['starting', 'started', 'stopped'], stderr: '' });
  });
}

test('a signal while the service starts stops it cleanly once started (exit 0)', async () => {
  const ended = await signalled('SIGTERM', 'starting', 1_500);
  assert.deepEqual(ended, { code: 0, lines: ['starting', 'started', 'stopped'], stderr: '' });
});

/**
 * The private nats-server of `npm test` / `npm run demo` (scripts/lib/nats.mjs): the port it is
 * given is free when picked, and may be taken before the server binds it, by another run's private
 * nats-server (several runs share a machine). The run must then not use that other server, which
 * goes away when its own run ends.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { startPrivateNats } from '../../scripts/lib/nats.mjs';
import { canConnect, readNatsInfo, waitFor } from '../../scripts/lib/net.mjs';
import { explainLoss, noteServer } from '../../scripts/lib/server-loss.mjs';

/** The real nats-server, as the scripts find it (Debian puts it in /usr/sbin). */
function realNatsServer(): string | undefined {
  for (const dir of [...(process.env['PATH'] ?? '').split(':'), '/usr/sbin', '/usr/local/bin']) {
    const candidate = path.join(dir, 'nats-server');
    if (dir && spawnSync(candidate, ['--version']).status === 0) return candidate;
  }
  return undefined;
}

const real = realNatsServer();

test(
  'a port taken by another nats-server before ours binds it is not used: the server starts on another',
  { skip: real === undefined ? 'no nats-server on this machine' : false },
  async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-nats-race-'));
    const foreignPid = path.join(dir, 'foreign.pid');
    // A `nats-server` first on the PATH. Its first start plays the race: another JetStream server
    // takes the port, then ours starts (about 0.3 s on a busy machine) and fails to bind, as the
    // real one does ("address already in use", exit 1). Later starts are the real server's.
    writeFileSync(
      path.join(dir, 'nats-server'),
      [
        '#!/bin/sh',
        `if [ ! -e '${dir}/raced' ]; then`,
        `  touch '${dir}/raced'`,
        '  port=$(printf "%s\\n" "$@" | grep -A1 -x -- -p | tail -n 1)',
        `  '${real}' -js -a 127.0.0.1 -p "$port" -sd '${dir}/foreign' -n someone-else >/dev/null 2>&1 &`,
        `  echo $! > '${foreignPid}'`,
        `  '${process.execPath}' -e "const net = require('node:net'); const p = Number(process.argv[1]); setTimeout(() => process.exit(1), 10000); (function poll() { const s = net.connect(p, '127.0.0.1'); s.on('data', () => process.exit(0)); s.on('error', () => setTimeout(poll, 20)); })()" "$port"`,
        '  sleep 0.3',
        'fi',
        `exec '${real}' "$@"`,
      ].join('\n'),
    );
    chmodSync(path.join(dir, 'nats-server'), 0o755);
    const savedPath = process.env['PATH'];
    process.env['PATH'] = `${dir}:${savedPath ?? ''}`;
    let nats: Awaited<ReturnType<typeof startPrivateNats>> | undefined;
    try {
      nats = await startPrivateNats();
      const port = Number(new URL(nats.url).port);
      const info = await readNatsInfo('127.0.0.1', port);
      assert.notEqual(info['server_name'], 'someone-else', `${nats.url} is the other run's server`);
      assert.equal(info['jetstream'], true);
    } finally {
      process.env['PATH'] = savedPath;
      await nats?.stop();
      try {
        process.kill(Number(readFileSync(foreignPid, 'utf8')), 'SIGKILL');
      } catch {
        // Not started, or gone.
      }
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  "a lost private nats-server is explained with the end of its log, as the machine's is",
  { skip: real === undefined ? 'no nats-server on this machine' : false },
  async () => {
    const nats = await startPrivateNats();
    try {
      const port = Number(new URL(nats.url).port);
      const noted = noteServer({ name: `NATS at 127.0.0.1:${port}`, port });
      assert.ok(noted.listener, 'its process is found');
      process.kill(noted.listener.pid, 'SIGKILL');
      await waitFor(async () => !(await canConnect('127.0.0.1', port)), { what: 'its end' });
      const lines = explainLoss(noted, { readKernelLog: () => '' });
      assert.match(lines[0] ?? '', /its process has exited/);
      const log = lines.find((line) => line.startsWith('the last '));
      assert.ok(log, `no log in:\n${lines.join('\n')}`);
      assert.match(log, /Server is ready/);
    } finally {
      await nats.stop();
    }
  },
);

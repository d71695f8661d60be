/**
 * What `npm test` can say about a server lost mid-run: the process that served its port (found in
 * /proc before the loss), whether it exited or hangs, the end of the log its command line names,
 * and the kernel's lines about it.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { isRunning, listenerOf, logFileOf } from '../../scripts/lib/listener.mjs';
import { explainLoss, noteServer } from '../../scripts/lib/server-loss.mjs';

/** A stand-in server: listens on a free port, told its log file with `-l` as nats-server is. */
const SERVER_SOURCE = `
import net from 'node:net';
const server = net.createServer((socket) => socket.end());
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

let dir: string;
let logFile: string;
let child: ChildProcess;
let port: number;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'sluice-server-loss-'));
  logFile = path.join(dir, 'server.log');
  writeFileSync(path.join(dir, 'server.mjs'), SERVER_SOURCE);
  writeFileSync(logFile, `${Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n')}\n`);
  child = spawn(process.execPath, [path.join(dir, 'server.mjs'), '-l', logFile], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [firstLine] = (await once(child.stdout!, 'data')) as [Buffer];
  port = Number(firstLine.toString().trim());
});

after(() => {
  child?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

test('finds the process listening on a port, with its command line and log file', () => {
  const listener = listenerOf(port);
  assert.ok(listener, `a listener on port ${port}`);
  assert.equal(listener.pid, child.pid);
  assert.deepEqual(listener.argv.slice(1), [path.join(dir, 'server.mjs'), '-l', logFile]);
  assert.equal(logFileOf(listener.argv), logFile);
  assert.equal(isRunning(listener), true);
});

test('reads the log file from the ways nats-server accepts it', () => {
  assert.equal(logFileOf(['nats-server', '-js', '--log', '/a.log']), '/a.log');
  assert.equal(logFileOf(['nats-server', '--log=/b.log']), '/b.log');
  assert.equal(logFileOf(['nats-server', '-js', '-p', '4222']), undefined);
});

test('a port nobody listens on has no listener, and its loss says so', async () => {
  const probe = net.createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const freePort = (probe.address() as net.AddressInfo).port;
  probe.close();
  await once(probe, 'close');
  const noted = noteServer({ name: 'NATS at 127.0.0.1:x', port: freePort });
  assert.equal(noted.listener, undefined);
  assert.deepEqual(explainLoss(noted), [
    'NATS at 127.0.0.1:x: which process served it was not known (not found in /proc at the start)',
  ]);
});

test('a hung server is still running; one that died has exited, with its log and the kernel lines', async () => {
  const noted = noteServer({ name: 'NATS at test', port });
  const pid = child.pid!;
  const kernelLog = [
    `[Sat Dec  5 16:00:00 2026] eth0: link up`,
    `[Sat Dec  5 16:00:01 2026] node[${pid}]: segfault at 0 ip 0 sp 0 error 4`,
    `[Sat Dec  5 16:00:02 2026] postgres[${pid + 1}]: segfault at 0 ip 0 sp 0 error 4`,
    `[Sat Dec  5 16:00:03 2026] Out of memory: Killed process ${pid} (node) total-vm:1kB`,
  ].join('\n');

  const hung = explainLoss(noted, { readKernelLog: () => '' });
  assert.match(
    hung[0]!,
    new RegExp(`^NATS at test: its process still runs but does not answer \\(pid ${pid}: `),
  );
  assert.match(hung[1]!, /^the last 20 lines of .*server\.log:\nline 11\n/);
  assert.match(hung[1]!, /\nline 30$/);
  assert.equal(hung[2], `the kernel's log says nothing about pid ${pid} or an out-of-memory kill`);
  const unreadable = explainLoss(noted, { readKernelLog: () => undefined });
  assert.equal(unreadable[2], `the kernel's log could not be read (dmesg)`);

  child.kill('SIGKILL');
  await once(child, 'exit');
  const died = explainLoss(noted, { readKernelLog: () => kernelLog });
  assert.match(died[0]!, new RegExp(`^NATS at test: its process has exited \\(pid ${pid}: .* -l `));
  assert.match(died[1]!, /^the last 20 lines of /);
  assert.equal(
    died[2],
    `the kernel's log about it:\n${kernelLog
      .split('\n')
      .filter((_, i) => i === 1 || i === 3)
      .join('\n')}`,
  );
});

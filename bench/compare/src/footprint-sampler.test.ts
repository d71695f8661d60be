import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { test } from 'node:test';
import {
  clockTicksPerSecond,
  cpuTicksOfStat,
  descendantsOf,
  FootprintSampler,
  pidsNamed,
  readProcess,
} from './footprint-sampler.js';

const MB = 1024 * 1024;

/**
 * A node child that holds ~`holdMb` MB resident, burns `burnMs` of CPU time (not wall time: the
 * machine may be busy), then idles.
 */
function busyChild(holdMb: number, burnMs: number): ChildProcess {
  const script = `
    const held = Buffer.alloc(${holdMb} * 1024 * 1024, 1);
    const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    let x = 0;
    while (cpuMs() < ${burnMs}) for (let i = 0; i < 1e5; i++) x += Math.sqrt(x + held[i % held.length]);
    process.stdout.write('burnt\\n');
    setInterval(() => held[0]++, 1000);`;
  return spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
}

async function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGKILL');
  await once(child, 'exit');
}

test('the utime and stime of a stat line are found after a command name with spaces', () => {
  const stat =
    '4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 1234 1000 10';
  assert.equal(cpuTicksOfStat(stat), 325);
  assert.throws(() => cpuTicksOfStat('1 (x) S'));
});

test('this process reads as itself: resident memory, its peak, CPU time', async () => {
  const reading = readProcess(process.pid);
  assert.ok(reading);
  assert.ok(reading.rssBytes > 10 * MB, `rss ${reading.rssBytes}`);
  assert.ok(reading.hwmBytes >= reading.rssBytes);
  assert.ok(reading.privateBytes > 0 && reading.privateBytes <= reading.rssBytes);
  assert.ok(reading.cpuSeconds > 0);
  assert.ok(clockTicksPerSecond() > 0);
  assert.equal(readProcess(2 ** 22 + 1), undefined, 'a pid above pid_max does not exist');
  const comm = (await readFile('/proc/self/comm', 'utf8')).trim();
  assert.ok((await pidsNamed(comm)).includes(process.pid));
});

test('descendants are found through every level', async () => {
  // Its own process group, so that the whole tree is killed at once at the end.
  const shell = spawn('sh', ['-c', 'sh -c "sleep 30 & wait" & wait'], {
    stdio: 'ignore',
    detached: true,
  });
  try {
    let found: number[] = [];
    for (let i = 0; i < 50 && found.length < 2; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      found = descendantsOf(shell.pid!);
    }
    assert.equal(found.length, 2, `two descendants (inner sh, sleep): ${found.join(',')}`);
  } finally {
    const exit = once(shell, 'exit');
    process.kill(-shell.pid!, 'SIGKILL');
    await exit;
    // A member forked while the signal was on its way escaped it: again, until none is left.
    for (let i = 0; i < 20; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      try {
        process.kill(-shell.pid!, 'SIGKILL');
      } catch {
        break;
      }
    }
  }
});

test('the sampler keeps the peak memory and the CPU seconds of a window, and survives an exit', async () => {
  const child = busyChild(64, 600);
  try {
    const sampler = new FootprintSampler(50);
    sampler.track({ role: 'busy', pid: child.pid! });
    sampler.track({ role: 'gone', pid: 2 ** 22 + 1 });
    sampler.start();
    const mark = sampler.mark();
    await once(child.stdout!, 'data');
    const cpu = sampler.cpuSince(mark);
    assert.ok((cpu.get('busy') ?? 0) >= 0.3, `busy burnt ${cpu.get('busy')} s`);
    assert.equal(cpu.get('gone'), 0);

    await exited(child);
    sampler.sample();
    sampler.stop();
    const busy = sampler.footprints().find((f) => f.role === 'busy');
    assert.ok(busy);
    assert.equal(busy.processes, 1);
    assert.equal(busy.currentBytes, 0, 'an exited process holds nothing');
    assert.ok(busy.peakBytes >= 64 * MB, `peak ${busy.peakBytes / MB} MB`);
    // Its CPU time stays counted after it is gone.
    assert.ok((sampler.cpuSince(mark).get('busy') ?? 0) >= 0.3);
    sampler.resetPeaks();
    assert.equal(sampler.footprints().find((f) => f.role === 'busy')?.peakBytes, 0);
  } finally {
    await exited(child);
  }
});

test('a process tracked after a mark counts its CPU from when it was first seen', async () => {
  const child = busyChild(1, 400);
  try {
    await once(child.stdout!, 'data');
    const sampler = new FootprintSampler();
    const mark = sampler.mark();
    sampler.track({ role: 'late', pid: child.pid!, memory: 'private' });
    const cpu = sampler.cpuSince(mark);
    assert.ok((cpu.get('late') ?? 1) < 0.1, `late ${cpu.get('late')} s`);
    const late = sampler.footprints().find((f) => f.role === 'late');
    assert.ok(late && late.currentBytes > 0 && late.firstBytes === late.currentBytes);
  } finally {
    await exited(child);
  }
});

test('a process whose whole life is measured counts its CPU from its start', async () => {
  const child = busyChild(1, 400);
  try {
    await once(child.stdout!, 'data');
    const sampler = new FootprintSampler();
    const mark = sampler.mark();
    sampler.track({ role: 'backend', pid: child.pid!, cpuFromStart: true });
    const cpu = sampler.cpuSince(mark);
    assert.ok((cpu.get('backend') ?? 0) >= 0.3, `backend ${cpu.get('backend')} s`);
  } finally {
    await exited(child);
  }
});

test("the sampler's own CPU time is taken off the process it runs in", () => {
  const sampler = new FootprintSampler();
  sampler.track({ role: 'self', pid: process.pid });
  const mark = sampler.mark();
  const ownBefore = sampler.ownCpu;
  for (let i = 0; i < 3_000; i += 1) sampler.sample();
  const own = sampler.ownCpu - ownBefore;
  const self = sampler.cpuSince(mark).get('self') ?? 0;
  assert.ok(own >= 0.05, `the sampling took ${own} s`);
  // Only the loop's own bookkeeping and a tick's rounding remain.
  assert.ok(self < own / 2, `self ${self} s, sampler ${own} s`);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CpuPerJobWindow, type CpuPerJob } from './cpu-per-job.js';
import { busyTicksOfProcStat } from './footprint-sampler.js';
import type { QueueSystem } from './system.js';
import { SystemProcesses } from './system-processes.js';

/** A system whose workers run in the bench process: only the bench process is measured. */
const inBench = { name: 'in-bench' } as unknown as QueueSystem;

/** What the window measured, read afresh (a getter: the compiler would keep an earlier check). */
const measuredBy = (window: CpuPerJobWindow): CpuPerJob | undefined => window.measured;

/** Burns `ms` of this process's CPU time (not wall time: the machine may be busy). */
function burn(ms: number): void {
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const until = cpuMs() + ms;
  let x = 0;
  while (cpuMs() < until) for (let i = 0; i < 1e5; i++) x += Math.sqrt(x + i);
  assert.ok(Number.isFinite(x));
}

test('the busy time of /proc/stat is user, nice, system, irq and softirq', () => {
  const stat = [
    'cpu  100 20 30 4000 50 6 7 800 900 10',
    'cpu0 50 10 15 2000 25 3 3 400 450 5',
    'intr 12345',
  ].join('\n');
  assert.equal(busyTicksOfProcStat(stat), 100 + 20 + 30 + 6 + 7);
  assert.throws(() => busyTicksOfProcStat('intr 1\n'), /no cpu line/);
  assert.throws(() => busyTicksOfProcStat('cpu  1 2 x 4 5 6 7\n'), /malformed/);
});

test('CPU per job is read between a quarter and three quarters of the starts', () => {
  const processes = new SystemProcesses(inBench);
  const window = new CpuPerJobWindow(processes, 100);
  window.observe(24);
  burn(50);
  window.observe(60); // opens here, the first count at or past a quarter
  assert.deepEqual(window.figures(), [], 'nothing before the window closes');
  burn(200);
  window.observe(74);
  assert.equal(measuredBy(window), undefined, 'still open below three quarters');
  window.observe(80);
  const measured = measuredBy(window);
  assert.ok(measured);
  assert.equal(measured.jobs, 20, 'the starts between the opening and the closing count');
  // ~200 ms of CPU over 20 jobs; the clock ticks are 10 ms, and other work of this process adds.
  assert.ok(measured.system >= 8 && measured.system < 40, `system ${measured.system} ms per job`);
  assert.equal(measured.byRole.get('bench process (client + workers)'), measured.system);
  assert.ok(measured.machine > 0, 'the machine was busy too');
  const keys = window.figures().map((f) => f.key);
  assert.deepEqual(keys.slice(0, 3), ['cpu_per_job', 'machine_cpu_per_job', 'cpu_window_jobs']);
  assert.ok(keys.includes('cpu_per_job:bench process (client + workers)'));
  assert.match(window.note(), /over 20 starts/);
  window.observe(100);
  assert.equal(measuredBy(window)?.jobs, 20, 'a closed window stays as it was');
});

test('a run too short to close the window has no CPU figures, and says so', () => {
  const processes = new SystemProcesses(inBench);
  const window = new CpuPerJobWindow(processes, 10);
  window.observe(10); // opens with every start in
  window.observe(10); // nothing started since: it cannot close on the same count
  assert.deepEqual(window.figures(), []);
  assert.match(window.note(), /too short/);
});

test('the client alone is not the system where the workers run elsewhere', async () => {
  const elsewhere = {
    name: 'elsewhere',
    // A worker process of its own (this one, as a stand-in: the test only reads roles).
    processes: () => Promise.resolve([{ role: 'executor', pid: process.ppid, runsWorkers: true }]),
  } as unknown as QueueSystem;
  const processes = new SystemProcesses(elsewhere);
  await processes.refresh();
  const window = new CpuPerJobWindow(processes, 4);
  window.observe(1);
  burn(100);
  window.observe(3);
  const measured = window.measured;
  assert.ok(measured);
  const client = measured.byRole.get('client');
  assert.ok(client !== undefined && client > 0, 'the bench process is the client');
  assert.equal(measured.system, measured.byRole.get('executor'), 'the total leaves the client out');
});

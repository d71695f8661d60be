import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CpuPerJobWindow } from './cpu-per-job.js';
import type { QueueSystem } from './system.js';
import { SystemProcesses } from './system-processes.js';
import { voluntarySwitchesOfStatus, WakeUpWindow, wakeUpsOf, wakeUpsPerJob } from './wake-ups.js';

/** A system whose workers run in the bench process: only the bench process is measured. */
const inBench = { name: 'in-bench' } as unknown as QueueSystem;

test('the voluntary context switches are read from a thread’s status', () => {
  const status = [
    'Name:\tnode',
    'State:\tS (sleeping)',
    'voluntary_ctxt_switches:\t1234',
    'nonvoluntary_ctxt_switches:\t56',
  ].join('\n');
  assert.equal(voluntarySwitchesOfStatus(status), 1234);
  assert.equal(voluntarySwitchesOfStatus('Name:\tkthread\n'), 0);
});

test('a process that sleeps and is woken counts the wake-ups; a gone one reads nothing', async () => {
  const before = wakeUpsOf(process.pid);
  assert.ok(before !== undefined && before > 0);
  // Each timer is waited for in the kernel (nothing else is due), and its expiry wakes the loop.
  for (let i = 0; i < 5; i++) await sleep(5);
  const after = wakeUpsOf(process.pid) as number;
  assert.ok(after - before >= 5, `${after - before} wake-ups over five sleeps`);
  assert.equal(wakeUpsOf(2 ** 22 + 1), undefined); // above the kernel's largest pid
});

test('wake-ups per job sum a role’s processes; one started in the window counts from its start', () => {
  const opened = new Map([
    [10, { role: 'gateway', wakeUps: 1_000 }],
    [20, { role: 'postgres backends', wakeUps: 500 }],
    [21, { role: 'postgres backends', wakeUps: 700 }], // gone by the close
  ]);
  const closed = new Map([
    [10, { role: 'gateway', wakeUps: 1_300 }],
    [20, { role: 'postgres backends', wakeUps: 900 }],
    [22, { role: 'postgres backends', wakeUps: 200 }], // started within the window
  ]);
  assert.deepEqual(
    wakeUpsPerJob(opened, closed, 100),
    new Map([
      ['gateway', 3],
      ['postgres backends', 6],
    ]),
  );
  assert.throws(() => wakeUpsPerJob(opened, closed, 0), /over 0 jobs/);
});

test('the window reads as the CPU window opens and closes, per job started in between', () => {
  const processes = new SystemProcesses(inBench);
  const counts = [100, 400];
  const wakeUps = new WakeUpWindow(processes, () => counts.shift());
  const cpu = new CpuPerJobWindow(processes, 100, [wakeUps]);
  cpu.observe(10);
  assert.equal(wakeUps.note(), undefined);
  cpu.observe(25); // opens
  cpu.observe(60);
  assert.deepEqual(wakeUps.figures(), []);
  cpu.observe(125); // closes: 100 jobs, 300 wake-ups
  assert.deepEqual(counts, []);
  assert.deepEqual(wakeUps.figures(), [
    {
      key: 'wake_ups_per_job:bench process (client + workers)',
      label: 'wake-ups per job, bench process (client + workers)',
      value: 3,
      unit: 'wake-ups',
    },
  ]);
  assert.match(
    wakeUps.note() ?? '',
    /^Wake-ups per job over the same starts \(voluntary context switches of every thread\): bench process \(client \+ workers\) 3\.0$/,
  );
});

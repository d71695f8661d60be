import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clockTicksPerSecond } from './footprint-sampler.js';
import { busyPercent, coresOfProcStat, MachineBusyWindow } from './machine-busy.js';

/** A /proc/stat of two cores whose `cpu` line has `busy` ticks of user time and nothing else. */
function procStat(busy: number): string {
  return [
    `cpu  ${busy} 0 0 1000 0 0 0 0 0 0`,
    'cpu0 0 0 0 500 0 0 0 0 0 0',
    'cpu1 0 0 0 500 0 0 0 0 0 0',
    'intr 1',
  ].join('\n');
}

test('the cores are the cpuN lines of /proc/stat', () => {
  assert.equal(coresOfProcStat(procStat(0)), 2);
  assert.throws(() => coresOfProcStat('cpu  1 2 3 4\nintr 1\n'), /no cpuN line/);
});

test('the busy share is busy seconds over wall seconds times cores', () => {
  assert.equal(busyPercent(1, 1, 2), 50);
  assert.equal(busyPercent(3, 2, 2), 75);
  assert.equal(busyPercent(0, 5, 2), 0);
  assert.throws(() => busyPercent(1, 0, 2), RangeError);
  assert.throws(() => busyPercent(-1, 1, 2), RangeError);
  assert.throws(() => busyPercent(1, 1, 0), RangeError);
});

test('a window counts the busy ticks since it opened, over its wall time and the cores', () => {
  const ticks = clockTicksPerSecond();
  let busy = 1_000_000;
  let now = 5_000;
  const window = new MachineBusyWindow(
    () => procStat(busy),
    () => now,
  );
  // Two seconds later the two cores had been busy for 2 CPU-seconds together: half of 4.
  busy += 2 * ticks;
  now += 2_000;
  assert.equal(window.percentSoFar(), 50);
  // Another second with nothing busy: 2 busy seconds in 3 s.
  now += 1_000;
  assert.equal(Math.round(window.percentSoFar() * 100) / 100, 33.33);
});

test('a window on the real /proc/stat reads a share between nothing and every core', () => {
  const window = new MachineBusyWindow();
  const until = performance.now() + 50;
  while (performance.now() < until) {
    // This process keeps one core busy meanwhile.
  }
  const percent = window.percentSoFar();
  assert.ok(Number.isFinite(percent) && percent >= 0, `${percent} %`);
});

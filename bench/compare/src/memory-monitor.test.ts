import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { describeKdamonds, kdamondCpuSeconds, readKdamonds } from './memory-monitor.js';

/** Writes `files` (relative path → content) under a fresh directory and returns it. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(tmpdir(), 'sluice-damon-'));
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), `${content}\n`);
  }
  return root;
}

test('a running paddr monitor with a pageout scheme is described with its sampling interval', (t) => {
  const root = tree({
    'kdamonds/nr_kdamonds': '1',
    'kdamonds/0/state': 'on',
    'kdamonds/0/pid': '79',
    'kdamonds/0/contexts/0/operations': 'paddr',
    'kdamonds/0/contexts/0/monitoring_attrs/intervals/sample_us': '500000',
    'kdamonds/0/contexts/0/schemes/0/action': 'pageout',
  });
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const kdamonds = readKdamonds(path.join(root, 'kdamonds'));
  assert.deepEqual(kdamonds, [
    { state: 'on', pid: 79, operations: ['paddr'], sampleUs: [500000], actions: ['pageout'] },
  ]);
  assert.equal(describeKdamonds(kdamonds), 'DAMON on (paddr, pageout, sampling every 500 ms)');
});

test('a stopped monitor has no pid and no CPU to report', (t) => {
  const root = tree({ 'kdamonds/0/state': 'off', 'kdamonds/0/pid': '-1' });
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const kdamonds = readKdamonds(path.join(root, 'kdamonds'));
  assert.equal(kdamonds[0]?.pid, undefined);
  assert.equal(describeKdamonds(kdamonds), 'DAMON off');
  assert.equal(kdamondCpuSeconds(kdamonds, root, 100), undefined);
});

test('a kernel without DAMON sysfs has no monitor', () => {
  assert.deepEqual(readKdamonds('/nonexistent/damon'), []);
  assert.equal(describeKdamonds([]), 'no DAMON monitor');
});

test("a monitor's CPU is its thread's utime + stime in clock ticks", (t) => {
  // A kernel thread's stat line; the name holds a space and a parenthesis to test the parsing.
  const root = tree({
    '79/stat': '79 (kdamond (0) x) I 2 0 0 0 -1 2129984 0 0 0 0 150 1872 0 0 20 0 1 0 121',
  });
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const running = [{ state: 'on', pid: 79, operations: [], sampleUs: [], actions: [] }];
  assert.equal(kdamondCpuSeconds(running, root, 100), 20.22);
  assert.equal(kdamondCpuSeconds([{ ...running[0]!, pid: 80 }], root, 100), undefined);
});

/**
 * The live heap probe (live-heap-probe.mjs) in a process of its own, preloaded as the bench stack
 * preloads it into Sluice's services: on SIGUSR2 it collects the garbage and says what is left.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { liveHeapProbeOptions, parseLiveHeap } from './live-heap.js';

const MB = 1024 * 1024;

/**
 * Holds ~100 MB of small objects, says "dropped" once it let go of them, then waits. Without a
 * full collection they stay in the heap: V8 has no reason to collect an idle process.
 */
const GARBAGE_MAKER = `
  let kept = Array.from({ length: 1_000_000 }, (_, i) => ({ i, text: 'garbage ' + i }));
  console.log('holding ' + Math.round(process.memoryUsage().heapUsed / ${MB}));
  kept = undefined;
  console.log('dropped');
  setTimeout(() => {}, 60_000);
`;

test('on SIGUSR2 the probe collects the garbage and reports the live heap on stderr', async (t) => {
  const child = spawn(process.execPath, ['-e', GARBAGE_MAKER], {
    env: { PATH: process.env['PATH'] ?? '', NODE_OPTIONS: liveHeapProbeOptions() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  const stdout = createInterface({ input: child.stdout });
  const stderr = createInterface({ input: child.stderr });
  let heldMb = 0;
  for await (const line of stdout) {
    if (line.startsWith('holding ')) heldMb = Number(line.slice('holding '.length));
    if (line === 'dropped') break;
  }
  assert.ok(heldMb > 50, `the garbage maker held ${heldMb} MB`);

  child.kill('SIGUSR2');
  const [line] = (await once(stderr, 'line')) as [string];
  const marker = 'sluice-bench live heap ';
  assert.ok(line.startsWith(marker), line);
  const heap = parseLiveHeap(line.slice(marker.length));
  assert.ok(
    heap.heapUsedBytes < 20 * MB,
    `live heap ${heap.heapUsedBytes / MB} MB after collecting`,
  );
  assert.ok(heap.rssBytes > heap.heapUsedBytes, 'resident memory holds the heap');
});

test('a probe line without a figure is refused, not reported as undefined', () => {
  assert.deepEqual(parseLiveHeap('{"heapUsedBytes":1,"rssBytes":2,"heapTotalBytes":3}'), {
    heapUsedBytes: 1,
    rssBytes: 2,
  });
  assert.throws(() => parseLiveHeap('{"heapUsedBytes":1}'), /rssBytes is undefined/);
  assert.throws(() => parseLiveHeap('{"heapUsedBytes":-1,"rssBytes":2}'), /heapUsedBytes is -1/);
});

/**
 * Footprint with `--idle-seconds`: the idle window is the one asked for, measured after as long a
 * settle, and the run's notes say so (the report's footnote points there). The raw Postgres floor
 * at smoke size, the cheapest system to set up.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runBench } from '../bench.js';
import { ok } from '../scenario.js';
import { footprint } from './footprint.js';

test('footprint watches the idle system as long as --idle-seconds says, after settling', async () => {
  const report = await runBench({
    scenarios: [footprint.name],
    systems: ['raw-postgres'],
    smoke: true,
    idleSeconds: 1,
    concurrency: 4,
    echo: false,
    progress: false,
    command: 'footprint idle smoke test',
  });
  const [result] = report.results;
  assert.ok(result && ok(result), result?.failure);
  // The window measured is the one asked for: smoke alone watches 0.3 s ("over 0 s").
  assert.ok(
    result.notes.some((n) => /^CPU idle over 1 s, after 1 s of settling/.test(n)),
    result.notes.join('\n'),
  );
  assert.ok(result.figures.some((f) => f.key.startsWith('idle_cpu_percent')));
});

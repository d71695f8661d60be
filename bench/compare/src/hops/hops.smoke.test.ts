/**
 * The hop floor at smoke size against the machine's servers: every hop is set up, timed and torn
 * down (its gRPC server process, test database and stream with it), and the report shows both
 * paths' floors.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareMachine } from '../machine.js';
import { HOP_NAMES, measureHops } from './hops.js';
import { renderHops } from './render.js';

test('every hop is timed idle and busy, and the report gives each path its floor', async () => {
  const timed: string[] = [];
  const figures = await measureHops({ count: 3, idleGapMs: 1, onHop: (name) => timed.push(name) });
  assert.deepEqual(timed, [...HOP_NAMES]);
  assert.deepEqual(
    figures.map((hop) => hop.name),
    [...HOP_NAMES],
  );
  for (const hop of figures) {
    assert.equal(hop.idle.count, 3, hop.name);
    assert.equal(hop.busy.count, 3, hop.name);
    assert.ok(hop.idle.min > 0 && hop.busy.min > 0, `${hop.name}: every pass takes some time`);
    // This process always spends some CPU on a pass; the far side's ticks may not show in 30.
    assert.ok(hop.cpu.clientMs > 0 && hop.cpu.serverMs >= 0, `${hop.name}: CPU counted`);
  }
  const report = renderHops(figures, await compareMachine(), { count: 3, idleGapMs: 1 });
  assert.match(report, /\*\*Sluice now: [^*]+\*\*: floor \d+\.\d ms/);
  assert.match(report, /\*\*any design with a durable create [^*]+\*\*: floor \d+\.\d ms/);
  for (const name of HOP_NAMES) assert.match(report, new RegExp(`^\\| ${name} \\|`, 'm'));
});

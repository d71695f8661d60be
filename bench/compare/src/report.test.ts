/**
 * results.md names what was measured: the version of each system under test (Sluice's commit, a
 * peer's library) whatever scenarios ran, not only where a table has a column for it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CompareMachine } from './machine.js';
import { markdown } from './report.js';
import type { ScenarioResult } from './scenario.js';

const MACHINE: CompareMachine = {
  cpu: 'test cpu',
  cores: 2,
  memoryGiB: 4,
  os: 'Linux',
  node: 'v20.0.0',
  nats: '2.9.10',
  postgres: '15.0',
  loadAtStart: 0.5,
  loadAtEnd: 0.5,
  redis: '7.0.0',
  postgresCommit: 'fsync=on, synchronous_commit=on',
  memoryMonitor: 'none',
  memoryMonitorCpuSeconds: undefined,
};

function result(scenario: string, name: string, versions: Record<string, string>): ScenarioResult {
  return {
    scenario,
    system: { name, durability: 'fsync per commit', batched: false },
    count: 10,
    concurrency: 4,
    versions,
    figures: [{ key: 'start_p50', label: 'send → start p50', value: 12.5, unit: 'ms' }],
    notes: [],
  };
}

test('every system measured is named with its versions, whatever the scenario', () => {
  const text = markdown({
    startedAt: new Date('2026-12-01T00:00:00Z'),
    machine: MACHINE,
    command: 'npm run bench -- idle-pickup,footprint',
    results: [
      result('idle-pickup', 'sluice', { sluice: 'abc1234', '@sluice/sdk': '0.1.0' }),
      result('idle-pickup', 'pg-boss', { 'pg-boss': '10.1.5', postgres: '15.0' }),
      result('footprint', 'sluice', { sluice: 'abc1234', '@sluice/sdk': '0.1.0' }),
    ],
  });
  assert.match(
    text,
    /^Versions: sluice: sluice abc1234, @sluice\/sdk 0\.1\.0; pg-boss: pg-boss 10\.1\.5, postgres 15\.0\.$/m,
  );
});

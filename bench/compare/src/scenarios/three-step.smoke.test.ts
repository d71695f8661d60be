/**
 * The three-step scenario at smoke size (issue 7: the CI suite runs a smoke version of each
 * scenario): Sluice's three-step tasks and pg-boss's chained jobs must run every step of every
 * chain exactly once, in order, and report their rates; a system without a chain adapter is
 * skipped, not failed; with a drain of the same system earlier in the command, the per-step time
 * is set against it; and the report shows the scenario.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runBench } from '../bench.js';
import { Progress } from '../progress.js';
import { markdown } from '../report.js';
import { ok, type ScenarioResult } from '../scenario.js';
import { loadSystems } from '../systems/index.js';
import { threeStep } from './three-step.js';

const CONCURRENCY = 8;

test(
  'three-step at smoke size: every step of every chain once, in order',
  { timeout: 180_000 },
  async () => {
    const report = await runBench({
      scenarios: [threeStep.name],
      systems: ['sluice', 'pg-boss', 'raw-postgres'],
      smoke: true,
      concurrency: CONCURRENCY,
      echo: false,
      progress: false,
      command: 'three-step smoke test',
    });
    assert.deepEqual(
      report.skipped?.map((s) => s.system),
      ['raw-postgres'],
    );
    assert.deepEqual(
      report.results.map((r) => r.system.name),
      ['sluice', 'pg-boss'],
    );
    for (const result of report.results) {
      const name = result.system.name;
      assert.ok(ok(result), `${name} failed: ${result.failure}`);
      assert.equal(result.count, threeStep.smokeCount);
      assert.equal(result.verdict?.exactlyOnce, true, name);
      assert.equal(result.verdict?.handled, threeStep.smokeCount, name);
      for (const key of ['enqueue_rate', 'chain_rate', 'step_rate', 'ms_per_step', 'hop_p50']) {
        const value = figure(result, key);
        assert.ok(value !== undefined && Number.isFinite(value) && value > 0, `${name} ${key}`);
      }
      // Three steps per chain: steps/s is three times chains/s.
      assert.ok(Math.abs(figure(result, 'step_rate')! - 3 * figure(result, 'chain_rate')!) < 1e-6);
      assert.ok(Object.keys(result.versions).length > 0, `${name} has versions`);
    }
    const text = markdown(report);
    assert.match(text, /## three-step/);
    assert.match(text, /\| sluice \|/);
    assert.match(text, /\| pg-boss \|/);
    assert.match(text, /raw-postgres: not run \(no chain adapter/);
    assert.match(text, /\| Exactly once, in order \|/);
    assert.doesNotMatch(text, /FAILED/);

    // A failed run shows as failed, without its figures.
    const [first] = report.results;
    assert.ok(first);
    const failed = markdown({
      ...report,
      results: [{ ...first, failure: 'step 1: 2 missing of 30 chains' }],
    });
    assert.match(failed, /\*\*FAILED\*\*: step 1: 2 missing of 30 chains/);
    const row = failed.split('\n').find((line) => line.startsWith(`| ${first.system.name} `));
    assert.ok(row);
    assert.doesNotMatch(row, /\| [\d,]+\.\d+ \|/);
  },
);

test(
  "three-step sets the per-step time against the same system's drain",
  { timeout: 60_000 },
  async () => {
    const create = (await loadSystems()).get('pg-boss');
    assert.ok(create, 'pg-boss is registered');
    const system = create({ concurrency: CONCURRENCY, echo: false });
    // A drain of pg-boss earlier in the command, at 100 jobs/s: 10 ms per job.
    const drain: ScenarioResult = {
      scenario: 'drain',
      system: { name: system.name, durability: system.durability, batched: false },
      count: 100,
      concurrency: CONCURRENCY,
      versions: {},
      figures: [{ key: 'processing_rate', label: 'processing', value: 100, unit: 'jobs/s' }],
      notes: [],
    };
    const result = await threeStep.run(system, {
      count: threeStep.smokeCount,
      concurrency: CONCURRENCY,
      progress: new Progress(false),
      earlier: [drain],
    });
    assert.ok(ok(result), `failed: ${result.failure}`);
    assert.equal(figure(result, 'drain_ms_per_job'), 10);
    const ratio = figure(result, 'step_vs_drain');
    assert.ok(ratio !== undefined);
    assert.ok(Math.abs(ratio - figure(result, 'ms_per_step')! / 10) < 1e-9);
  },
);

function figure(result: ScenarioResult, key: string): number | undefined {
  return result.figures.find((f) => f.key === key)?.value;
}

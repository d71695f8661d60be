/**
 * The benchmark harness at smoke size (issue 7: "the CI test suite runs a smoke version of each
 * scenario so the harness cannot rot"): every scenario on every system that loads — the raw floors,
 * Sluice as separate processes, and the peers' adapters when present — must hand every job to the
 * handler exactly once and produce its figures, and the report must render them; a failed run must
 * show as failed in the report, never as a number.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { runBench } from './bench.js';
import { drainSvg, markdown } from './report.js';
import { ok } from './scenario.js';
import { DEFAULT_SCENARIOS } from './scenarios/index.js';
import { loadSystems, OWN_SYSTEMS } from './systems/index.js';

/** Set to a comma-separated list to smoke only some systems (e.g. while writing an adapter). */
const ONLY = process.env['SLUICE_BENCH_SMOKE_SYSTEMS'];

/** Whether something answers TCP on the machine's Redis port. */
function machineRedisAnswers(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: 6379 });
    socket.setTimeout(1_000);
    const done = (answers: boolean) => {
      socket.destroy();
      resolve(answers);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

test(
  'every scenario at smoke size: exactly once, with figures',
  { timeout: 120_000 },
  async (t) => {
    const known = [...(await loadSystems()).keys()];
    for (const own of OWN_SYSTEMS) assert.ok(known.includes(own), `${own} is registered`);
    let systems = ONLY === undefined ? known : ONLY.split(',').map((s) => s.trim());
    // The machine's Redis is a benchmark comparison only, not something `npm test` prepares: where
    // it does not run, the BullMQ adapter is still exercised through its private AOF server.
    if (!(await machineRedisAnswers())) {
      const needsMachineRedis = new Set(['bullmq', 'bullmq-batched']);
      const skipped = systems.filter((s) => needsMachineRedis.has(s));
      systems = systems.filter((s) => !needsMachineRedis.has(s));
      t.diagnostic(`no Redis on 127.0.0.1:6379: ${skipped.join(', ')} not smoked`);
    }
    const report = await runBench({
      scenarios: DEFAULT_SCENARIOS,
      systems,
      smoke: true,
      concurrency: 8,
      echo: false,
      progress: false,
      command: 'smoke test',
    });
    assert.equal(report.results.length, DEFAULT_SCENARIOS.length * systems.length);
    for (const result of report.results) {
      const name = `${result.scenario} ${result.system.name}${result.system.batched ? ' (batched)' : ''}`;
      assert.ok(ok(result), `${name} failed: ${result.failure}`);
      assert.equal(result.verdict?.exactlyOnce, true, name);
      assert.equal(result.verdict?.handled, result.count, name);
      assert.ok(result.figures.length > 0, `${name} has figures`);
      for (const figure of result.figures) {
        assert.ok(Number.isFinite(figure.value) && figure.value >= 0, `${name} ${figure.key}`);
      }
      const rates = result.figures.filter((f) => f.unit === 'jobs/s');
      assert.ok(rates.length > 0 && rates.every((f) => f.value > 0), `${name} has rates`);
      assert.ok(Object.keys(result.versions).length > 0, `${name} has versions`);
    }
    const text = markdown(report);
    for (const result of report.results)
      assert.match(text, new RegExp(`\\| ${result.system.name} \\|`));
    assert.doesNotMatch(text, /FAILED/);
    assert.match(report.machine.node, /^v\d+/);
    assert.ok(report.machine.cores > 0);

    // The same report with one run failed: shown as failed, without its figures or bar.
    const [first] = report.results;
    assert.ok(first);
    const failed = { ...report, results: [{ ...first, failure: '3 missing of 200' }] };
    assert.match(markdown(failed), /\*\*FAILED\*\*: 3 missing of 200/);
    const svg = drainSvg(failed);
    assert.match(svg, /FAILED: 3 missing of 200/);
    assert.doesNotMatch(svg, /fill="#3182bd" ?\/>\s*<text[^>]*>\d/);
  },
);

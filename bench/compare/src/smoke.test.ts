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
import { CHARTS, drainSvg, markdown } from './report.js';
import { ok, type ScenarioResult } from './scenario.js';
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
  // ~2 minutes on a 2-core machine (footprint's idle and backlog windows are shortened in smoke).
  { timeout: 540_000 },
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
    // One load per scenario run once per load (the default set's): each scenario once per system,
    // run or skipped (the raw floors have no priorities; batched variants send no single jobs).
    assert.equal(
      report.results.length + (report.skipped?.length ?? 0),
      DEFAULT_SCENARIOS.length * systems.length,
    );
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
      for (const measure of LATENCY_MEASURES[result.scenario] ?? []) {
        assertPercentiles(result, measure, name);
      }
      // Over the CPU window's starts, when a run at smoke size lasted long enough for one.
      const windowClosed = result.figures.some((f) => f.key === 'cpu_per_job');
      if (result.scenario === 'end-to-end' && windowClosed) {
        // The client at least waited for its jobs' starts.
        const wakeUps = result.figures.filter((f) => f.key.startsWith('wake_ups_per_job:'));
        assert.ok(
          wakeUps.some((f) => f.value > 0),
          `${name}: wake-ups per job`,
        );
      }
      if (
        result.scenario === 'end-to-end' &&
        windowClosed &&
        POSTGRES_SYSTEMS.test(result.system.name)
      ) {
        const work = result.figures.find((f) => f.key === 'pg_transactions_per_job');
        assert.ok(work !== undefined && work.value > 0, `${name}: Postgres work per job`);
      }
      for (const key of PHASE_FIGURES[result.scenario] ?? []) {
        assert.ok(
          result.figures.some((f) => f.key === key),
          `${name} reports ${key}`,
        );
      }
    }
    const ran = new Set(report.results.map((r) => r.scenario));
    for (const scenario of ['end-to-end', 'idle-pickup', 'priority']) {
      assert.ok(ran.has(scenario), `${scenario} ran on some system`);
    }
    assertFootprints(report.results.filter((r) => r.scenario === 'footprint'));
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

    // Every chart renders its scenario's results, and a failed latency run without bars.
    for (const [scenario, chart] of Object.entries(CHARTS)) {
      const svg = chart(report);
      assert.match(svg, /^<svg[\s\S]*<\/svg>\n$/, `${scenario} chart`);
      const run = report.results.find((r) => r.scenario === scenario);
      if (run === undefined || scenario === 'drain') continue;
      assert.match(svg, new RegExp(run.system.name), `${scenario} chart names ${run.system.name}`);
      const broken = chart({ ...report, results: [{ ...run, failure: '2 duplicated of 60' }] });
      assert.match(broken, /FAILED: 2 duplicated of 60/);
      assert.doesNotMatch(broken, /<rect x="\d+" y="\d+" width="[\d.]+" height="12"/);
    }
  },
);

/** The systems whose jobs live in Postgres, and so report the server's work per job. */
const POSTGRES_SYSTEMS = /^(sluice|pg-boss|graphile-worker|raw-postgres)(-batched)?$/;

/** The latency figures each latency scenario must report (`<key>_p50/p95/p99`, in ms). */
const LATENCY_MEASURES: Readonly<Record<string, readonly string[]>> = {
  'end-to-end': ['start', 'complete', 'enqueue'],
  'idle-pickup': ['start', 'complete', 'enqueue'],
  priority: [
    'high_backlog',
    'high_idle',
    'enqueue_backlog',
    'enqueue_idle',
    'send_lag_backlog',
    'send_lag_idle',
  ],
};

/** The figures a scenario gives (per phase, for priority) besides its latencies. */
const PHASE_FIGURES: Readonly<Record<string, readonly string[]>> = {
  'end-to-end': ['start_rate'],
  priority: ['machine_busy_backlog', 'machine_busy_idle'],
};

function assertPercentiles(result: ScenarioResult, key: string, name: string): void {
  const value = (p: string) => result.figures.find((f) => f.key === `${key}_${p}`)?.value;
  const [p50, p95, p99] = [value('p50'), value('p95'), value('p99')];
  assert.ok(
    p50 !== undefined && p95 !== undefined && p99 !== undefined,
    `${name} ${key} p50/95/99`,
  );
  assert.ok(p50 <= p95 && p95 <= p99, `${name} ${key}: p50 ≤ p95 ≤ p99`);
}

/**
 * Footprint measured the processes: CPU per 1,000 jobs of both phases, the bench process's peak
 * memory, and (the systems naming processes of their own) the peak of another process too.
 */
function assertFootprints(results: readonly ScenarioResult[]): void {
  assert.ok(results.length > 0, 'footprint ran on some system');
  for (const result of results) {
    const name = `footprint ${result.system.name}${result.system.batched ? ' (batched)' : ''}`;
    const value = (key: string) => result.figures.find((f) => f.key === key)?.value;
    for (const key of ['cpu_enqueue_per_1k', 'cpu_processing_per_1k', 'backlog_mb']) {
      assert.notEqual(value(key), undefined, `${name} ${key}`);
    }
    // The systems that keep their jobs in Postgres report its work per job, the others none.
    const work = ['enqueue', 'processing'].flatMap((phase) =>
      ['pg_transactions_per_job', 'pg_wal_kb_per_job'].map((kind) => value(`${kind}:${phase}`)),
    );
    if (POSTGRES_SYSTEMS.test(result.system.name)) {
      assert.ok(
        work.every((v) => v !== undefined && v > 0),
        `${name}: Postgres work per job ${work.join(', ')}`,
      );
    } else {
      assert.ok(
        work.every((v) => v === undefined),
        `${name}: no Postgres work`,
      );
    }
    // Sluice's services, asked to collect their garbage with the backlog queued, answered; no
    // other system has Node processes of its own to ask.
    if (result.system.name === 'sluice') {
      for (const role of ['gateway', 'scheduler', 'governor']) {
        const [idle, heap, processed] = ['idle', 'backlogged', 'processed'].map((moment) =>
          value(`live_heap_mb:${moment}:${role}`),
        );
        const resident = value(`collected_mb:${role}`);
        assert.ok(
          heap !== undefined && resident !== undefined && heap > 0 && heap < resident,
          `${name}: the ${role}'s live heap ${heap} MB within its resident ${resident} MB`,
        );
        assert.ok(idle! > 0 && processed! > 0, `${name}: the ${role}'s live heap before and after`);
      }
      assert.ok(value('live_heap_mb:processed:executor')! > 0, `${name}: the executor's after`);
    } else {
      assert.ok(
        result.figures.every((f) => !f.key.startsWith('live_heap_mb:')),
        `${name}: no live heaps`,
      );
    }
    const peaks = result.figures.filter((f) => f.key.startsWith('peak_mb:'));
    const bench = peaks.find((f) => f.key === 'peak_mb:client' || f.key.includes('bench process'));
    assert.ok(bench !== undefined && bench.value > 10, `${name}: the bench process's peak`);
    const own = peaks.filter((f) => f !== bench && !f.label.endsWith(' Δ'));
    if (!result.system.name.startsWith('raw-jetstream') && result.system.name !== 'bullmq') {
      assert.ok(
        own.some((f) => f.value > 0),
        `${name}: a process of its own measured`,
      );
    }
  }
}

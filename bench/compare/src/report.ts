/**
 * The written results (issue 7): a markdown section per scenario with a table of every result, its
 * durability label, variant and versions, the machine facts, and hand-written SVG bar charts (drain
 * rates; latency percentiles of the latency scenarios) — no chart dependency for a few rectangles.
 */
import { figureValue, formatNumber } from './report-format.js';
import { footprintTable } from './footprint-report.js';
import { threeStepTable } from './three-step-report.js';
import { describeMemoryMonitor, type CompareMachine } from './machine.js';
import { ok, type ScenarioResult, type SkippedRun } from './scenario.js';

export interface BenchReport {
  readonly startedAt: Date;
  readonly machine: CompareMachine;
  readonly results: readonly ScenarioResult[];
  /** Scenarios not run on some systems (they do not apply), with why. */
  readonly skipped?: readonly SkippedRun[];
  /** The command line that produced it, for reproduction. */
  readonly command: string;
}

export function variantOf(result: ScenarioResult): string {
  return result.system.batched ? 'batched' : 'one-at-a-time';
}

function versionsText(versions: Record<string, string>): string {
  return Object.entries(versions)
    .map(([name, version]) => `${name} ${version}`)
    .join(', ');
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The Markdown of docs/benchmarks/results.md. */
export function markdown(report: BenchReport): string {
  const m = report.machine;
  const lines = [
    '# Benchmark results',
    '',
    `Written by \`${report.command}\` on ${report.startedAt.toISOString()}; see README.md for the method.`,
    '',
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}; node ${m.node}, nats-server ${m.nats}, ` +
      `Postgres ${m.postgres} (${m.postgresCommit}), Redis ${m.redis}; load ${formatNumber(m.loadAtStart, 2)} at start, ` +
      `${formatNumber(m.loadAtEnd, 2)} at end; ${describeMemoryMonitor(m)}.`,
    '',
    ...systemVersions(report.results),
  ];
  const skipped = report.skipped ?? [];
  const scenarios = [
    ...new Set([...report.results.map((r) => r.scenario), ...skipped.map((s) => s.scenario)]),
  ];
  for (const scenario of scenarios) {
    const results = report.results.filter((r) => r.scenario === scenario);
    lines.push(`## ${scenario}`, '');
    const latencyTable = LATENCY_TABLES[scenario];
    if (results.length === 0) {
      lines.push('No system ran this scenario.');
    } else if (latencyTable) {
      lines.push(...latencyTable(results));
    } else if (scenario === 'footprint') {
      lines.push(...footprintTable(results));
    } else if (scenario === 'three-step') {
      lines.push(...threeStepTable(results));
    } else if (scenario === 'drain') {
      lines.push(
        '| System | Variant | Durability | Jobs | Concurrency | Enqueue (jobs/s) | Processing (jobs/s) | Start → first job (ms) | Exactly once | Versions |',
        '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |',
      );
      for (const r of results) {
        const good = ok(r);
        lines.push(
          `| ${r.system.name} | ${variantOf(r)} | ${r.system.durability} | ${r.count} | ${r.concurrency} | ` +
            `${good ? formatNumber(figureValue(r, 'enqueue_rate')) : 'failed'} | ` +
            `${good ? formatNumber(figureValue(r, 'processing_rate')) : 'failed'} | ` +
            `${good ? formatNumber(figureValue(r, 'first_start_ms')) : '–'} | ` +
            `${good ? 'yes' : `**FAILED**: ${escapeCell(r.failure ?? '')}`} | ${escapeCell(versionsText(r.versions))} |`,
        );
      }
    } else {
      lines.push(
        '| System | Variant | Durability | Figures | Exactly once |',
        '| --- | --- | --- | --- | --- |',
      );
      for (const r of results) {
        const figures = r.figures
          .map((f) => `${f.label} ${formatNumber(f.value, 1)} ${f.unit}`)
          .join('; ');
        lines.push(
          `| ${r.system.name} | ${variantOf(r)} | ${r.system.durability} | ${ok(r) ? figures : 'failed'} | ` +
            `${ok(r) ? 'yes' : `**FAILED**: ${escapeCell(r.failure ?? '')}`} |`,
        );
      }
    }
    const notes = [
      ...results.flatMap((r) => r.notes.map((n) => `- ${resultName(r)}: ${n}`)),
      ...skipped
        .filter((s) => s.scenario === scenario)
        .map((s) => `- ${s.system}: not run (${s.reason})`),
    ];
    if (notes.length > 0) lines.push('', ...notes);
    lines.push('');
  }
  return `${lines.join('\n')}`;
}

/**
 * One line naming each system measured with its versions (Sluice's commit, a peer's library): only
 * drain's and three-step's tables have a column for them, and a report of other scenarios would
 * not say what it measured.
 */
function systemVersions(results: readonly ScenarioResult[]): string[] {
  const bySystem = new Map<string, string>();
  for (const r of results) {
    const text = versionsText(r.versions);
    if (text !== '' && !bySystem.has(r.system.name)) bySystem.set(r.system.name, text);
  }
  if (bySystem.size === 0) return [];
  const named = [...bySystem].map(([system, text]) => `${system}: ${text}`).join('; ');
  return [`Versions: ${named}.`, ''];
}

/** `system (setting)`: how notes and charts name one result. */
function resultName(r: ScenarioResult): string {
  return r.setting === undefined ? r.system.name : `${r.system.name} (${r.setting})`;
}

/** `p50 / p95 / p99` of the figures `${key}_p…` in ms, or `–` where there are none. */
function percentiles(r: ScenarioResult, key: string): string {
  const values = ['p50', 'p95', 'p99'].map((p) => figureValue(r, `${key}_${p}`));
  if (values.every((v) => v === undefined)) return '–';
  return values.map((v) => formatNumber(v, 1)).join(' / ');
}

/** How long each phase's high enqueue calls took (priority.ts), p50 / p95, `–` without. */
function enqueueByPhase(r: ScenarioResult): string {
  const phases = ['backlog', 'idle'].map((phase) => {
    const [p50, p95] = ['p50', 'p95'].map((p) => figureValue(r, `enqueue_${phase}_${p}`));
    return p50 === undefined ? '–' : `${formatNumber(p50, 1)} / ${formatNumber(p95, 1)}`;
  });
  return phases.every((p) => p === '–') ? '–' : phases.join(' · ');
}

/** The machine's busy share while each phase's high jobs arrived (priority.ts), `–` without. */
function machineBusy(r: ScenarioResult): string {
  const values = ['backlog', 'idle'].map((phase) => figureValue(r, `machine_busy_${phase}`));
  if (values.every((v) => v === undefined)) return '–';
  return values.map((v) => formatNumber(v, 0)).join(' / ');
}

function exactlyOnceCell(r: ScenarioResult): string {
  return ok(r) ? 'yes' : `**FAILED**: ${escapeCell(r.failure ?? '')}`;
}

/** A cell of a figure of a result that counts, `failed` or `–` otherwise. */
function cell(r: ScenarioResult, text: string): string {
  return ok(r) ? text : 'failed';
}

const ARRIVALS_HEAD = [
  '| System | Durability | Load | Arrivals (jobs/s) | Jobs | Started (jobs/s) | Send → start p50 / p95 / p99 (ms) | Send → completed p50 / p95 / p99 (ms) | Enqueue call p50 / p95 / p99 (ms) | Exactly once |',
  '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
];

function arrivalsRow(r: ScenarioResult): string {
  return (
    `| ${r.system.name} | ${r.system.durability} | ${r.setting ?? '–'} | ` +
    `${cell(r, formatNumber(figureValue(r, 'arrival_rate'), 1))} | ${formatNumber(figureValue(r, 'measured_jobs'))} | ` +
    `${cell(r, formatNumber(figureValue(r, 'start_rate'), 1))} | ${cell(r, percentiles(r, 'start'))} | ${cell(r, percentiles(r, 'complete'))} | ` +
    `${cell(r, percentiles(r, 'enqueue'))} | ${exactlyOnceCell(r)} |`
  );
}

/** The tables of the latency scenarios (percentiles over every sample; see latency.ts). */
const LATENCY_TABLES: Readonly<Record<string, (results: readonly ScenarioResult[]) => string[]>> = {
  'end-to-end': (results) => [...ARRIVALS_HEAD, ...results.map(arrivalsRow)],
  'idle-pickup': (results) => [...ARRIVALS_HEAD, ...results.map(arrivalsRow)],
  priority: (results) => [
    '| System | Durability | Low backlog | High arrivals (jobs/s) | High wait in backlog p50 / p95 / p99 (ms) | … after its first second | High wait idle p50 / p95 / p99 (ms) | p95 backlog / idle | High enqueue call p50 / p95, backlog · idle (ms) | Low jobs left at the last high send | Machine busy as high jobs arrive, backlog / idle (%) | Exactly once |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    ...results.map(
      (r) =>
        `| ${r.system.name} | ${r.system.durability} | ${formatNumber(figureValue(r, 'low_backlog'))} | ` +
        `${cell(r, formatNumber(figureValue(r, 'high_rate'), 1))} | ` +
        `${cell(r, percentiles(r, 'high_backlog'))} | ${cell(r, percentiles(r, 'high_backlog_settled'))} | ` +
        `${cell(r, percentiles(r, 'high_idle'))} | ` +
        `${cell(r, formatNumber(figureValue(r, 'p95_ratio'), 2))} | ` +
        `${cell(r, enqueueByPhase(r))} | ` +
        `${cell(r, formatNumber(figureValue(r, 'low_left_at_last_high')))} | ` +
        `${cell(r, machineBusy(r))} | ${exactlyOnceCell(r)} |`,
    ),
  ],
};

const BAR_HEIGHT = 14;
const GROUP_GAP = 10;
const LABEL_WIDTH = 260;
const CHART_WIDTH = 460;
const VALUE_WIDTH = 110;

function escapeXml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/**
 * A horizontal bar chart of the drain results: per system two bars (enqueue and processing, jobs/s)
 * on one linear scale; failed runs are shown as such, without bars.
 */
export function drainSvg(report: BenchReport): string {
  const results = report.results.filter((r) => r.scenario === 'drain');
  const values = results.flatMap((r) =>
    ok(r) ? [figureValue(r, 'enqueue_rate') ?? 0, figureValue(r, 'processing_rate') ?? 0] : [],
  );
  const max = Math.max(1, ...values);
  const top = 56;
  const groupHeight = 2 * BAR_HEIGHT + GROUP_GAP;
  const height = top + results.length * groupHeight + 30;
  const width = LABEL_WIDTH + CHART_WIDTH + VALUE_WIDTH;
  const m = report.machine;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">Drain: jobs per second (higher is better)</text>`,
    `<text x="10" y="38" fill="#555">${escapeXml(`${m.cores} cores, node ${m.node}, nats-server ${m.nats}, Postgres ${m.postgres}, Redis ${m.redis}`)}</text>`,
    `<rect x="${LABEL_WIDTH}" y="44" width="10" height="10" fill="#9ecae1"/><text x="${LABEL_WIDTH + 14}" y="53">enqueue</text>`,
    `<rect x="${LABEL_WIDTH + 80}" y="44" width="10" height="10" fill="#3182bd"/><text x="${LABEL_WIDTH + 94}" y="53">processing</text>`,
  ];
  results.forEach((r, i) => {
    const y = top + i * groupHeight;
    const name = `${r.system.name} (${variantOf(r)})`;
    parts.push(
      `<text x="10" y="${y + BAR_HEIGHT + 4}">${escapeXml(name)}</text>`,
      `<text x="10" y="${y + 2 * BAR_HEIGHT + 2}" fill="#777" font-size="10">${escapeXml(r.system.durability)}</text>`,
    );
    if (!ok(r)) {
      parts.push(
        `<text x="${LABEL_WIDTH}" y="${y + BAR_HEIGHT + 4}" fill="#c00">FAILED: ${escapeXml(r.failure ?? '')}</text>`,
      );
      return;
    }
    const bars: Array<[string, number]> = [
      ['#9ecae1', figureValue(r, 'enqueue_rate') ?? 0],
      ['#3182bd', figureValue(r, 'processing_rate') ?? 0],
    ];
    bars.forEach(([colour, value], j) => {
      const barY = y + j * BAR_HEIGHT;
      const barWidth = Math.max(1, (value / max) * CHART_WIDTH);
      parts.push(
        `<rect x="${LABEL_WIDTH}" y="${barY}" width="${barWidth.toFixed(1)}" height="${BAR_HEIGHT - 2}" fill="${colour}"/>`,
        `<text x="${(LABEL_WIDTH + barWidth + 4).toFixed(1)}" y="${barY + BAR_HEIGHT - 3}">${formatNumber(value)}</text>`,
      );
    });
  });
  parts.push('</svg>', '');
  return parts.join('\n');
}

/** One measure of a latency chart: the figures `${key}_p50/p95/p99`. */
interface LatencySeries {
  readonly key: string;
  readonly label: string;
}

const PERCENTILE_COLOURS: ReadonlyArray<[percentile: string, colour: string]> = [
  ['p50', '#9ecae1'],
  ['p95', '#4292c6'],
  ['p99', '#08519c'],
];
/** The left end of the logarithmic scale (ms): latencies span 1 ms (a floor) to seconds. */
const LOG_FLOOR_MS = 0.1;

/**
 * A horizontal bar chart of latency percentiles: per result and measure three bars (p50, p95,
 * p99) on one logarithmic scale; failed runs are shown as such, without bars.
 */
export function latencySvg(
  report: BenchReport,
  scenario: string,
  title: string,
  series: readonly LatencySeries[],
): string {
  const results = report.results.filter((r) => r.scenario === scenario);
  const values = results.flatMap((r) =>
    ok(r)
      ? series.flatMap((s) =>
          PERCENTILE_COLOURS.map(([p]) => figureValue(r, `${s.key}_${p}`) ?? LOG_FLOOR_MS),
        )
      : [],
  );
  const max = Math.max(LOG_FLOOR_MS * 10, ...values);
  const scale = (ms: number) =>
    (Math.log10(Math.max(ms, LOG_FLOOR_MS) / LOG_FLOOR_MS) / Math.log10(max / LOG_FLOOR_MS)) *
    CHART_WIDTH;
  const top = 56;
  const seriesHeight = PERCENTILE_COLOURS.length * BAR_HEIGHT + 4;
  const groupHeight = series.length * seriesHeight + GROUP_GAP;
  const height = top + results.length * groupHeight + 30;
  const width = LABEL_WIDTH + CHART_WIDTH + VALUE_WIDTH;
  const m = report.machine;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">${escapeXml(title)}: ms, logarithmic (lower is better)</text>`,
    `<text x="10" y="38" fill="#555">${escapeXml(`${m.cores} cores, node ${m.node}, nats-server ${m.nats}, Postgres ${m.postgres}, Redis ${m.redis}`)}</text>`,
    ...PERCENTILE_COLOURS.map(
      ([p, colour], i) =>
        `<rect x="${LABEL_WIDTH + i * 60}" y="44" width="10" height="10" fill="${colour}"/><text x="${LABEL_WIDTH + i * 60 + 14}" y="53">${p}</text>`,
    ),
  ];
  results.forEach((r, i) => {
    const y = top + i * groupHeight;
    parts.push(`<text x="10" y="${y + BAR_HEIGHT}">${escapeXml(resultName(r))}</text>`);
    if (!ok(r)) {
      parts.push(
        `<text x="${LABEL_WIDTH}" y="${y + BAR_HEIGHT}" fill="#c00">FAILED: ${escapeXml(r.failure ?? '')}</text>`,
      );
      return;
    }
    series.forEach((s, j) => {
      const seriesY = y + j * seriesHeight;
      parts.push(
        `<text x="20" y="${seriesY + 2 * BAR_HEIGHT + 2}" fill="#777" font-size="10">${escapeXml(s.label)}</text>`,
      );
      PERCENTILE_COLOURS.forEach(([p, colour], k) => {
        const value = figureValue(r, `${s.key}_${p}`);
        const barY = seriesY + k * BAR_HEIGHT;
        if (value === undefined) {
          if (k === 0) {
            parts.push(
              `<text x="${LABEL_WIDTH}" y="${barY + BAR_HEIGHT - 3}" fill="#777">not available</text>`,
            );
          }
          return;
        }
        const barWidth = Math.max(1, scale(value));
        parts.push(
          `<rect x="${LABEL_WIDTH}" y="${barY}" width="${barWidth.toFixed(1)}" height="${BAR_HEIGHT - 2}" fill="${colour}"/>`,
          `<text x="${(LABEL_WIDTH + barWidth + 4).toFixed(1)}" y="${barY + BAR_HEIGHT - 3}">${formatNumber(value, 1)}</text>`,
        );
      });
    });
  });
  parts.push('</svg>', '');
  return parts.join('\n');
}

const ARRIVAL_SERIES: readonly LatencySeries[] = [
  { key: 'start', label: 'send → start' },
  { key: 'complete', label: 'send → completed' },
];

/** The chart of each scenario that has one, written as `<scenario>.svg`. */
export const CHARTS: Readonly<Record<string, (report: BenchReport) => string>> = {
  drain: drainSvg,
  'end-to-end': (report) => latencySvg(report, 'end-to-end', 'End-to-end latency', ARRIVAL_SERIES),
  'idle-pickup': (report) =>
    latencySvg(report, 'idle-pickup', 'Idle pickup latency', ARRIVAL_SERIES),
  priority: (report) =>
    latencySvg(report, 'priority', 'High-priority wait', [
      { key: 'high_backlog', label: 'behind the backlog' },
      { key: 'high_idle', label: 'idle' },
    ]),
};

/**
 * The written results (issue 7): a markdown table of every result with its durability label,
 * variant and versions, the machine facts, and a hand-written SVG bar chart of the drain rates —
 * no chart dependency for a few rectangles.
 */
import type { CompareMachine } from './machine.js';
import { ok, type ScenarioResult } from './scenario.js';

export interface BenchReport {
  readonly startedAt: Date;
  readonly machine: CompareMachine;
  readonly results: readonly ScenarioResult[];
  /** The command line that produced it, for reproduction. */
  readonly command: string;
}

export function variantOf(result: ScenarioResult): string {
  return result.system.batched ? 'batched' : 'one-at-a-time';
}

function figureValue(result: ScenarioResult, key: string): number | undefined {
  return result.figures.find((f) => f.key === key)?.value;
}

function formatNumber(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
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
      `${formatNumber(m.loadAtEnd, 2)} at end.`,
    '',
  ];
  const scenarios = [...new Set(report.results.map((r) => r.scenario))];
  for (const scenario of scenarios) {
    const results = report.results.filter((r) => r.scenario === scenario);
    lines.push(`## ${scenario}`, '');
    if (scenario === 'drain') {
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
    const notes = results.flatMap((r) => r.notes.map((n) => `- ${r.system.name}: ${n}`));
    if (notes.length > 0) lines.push('', ...notes);
    lines.push('');
  }
  return `${lines.join('\n')}`;
}

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

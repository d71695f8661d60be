/**
 * The hop floor as markdown: the machine, each hop idle and busy, and each path's legs with its
 * floor.
 */
import type { LatencySummary } from '../latency.js';
import { describeMemoryMonitor, type CompareMachine } from '../machine.js';
import { formatNumber } from '../report-format.js';
import { HOP_DESCRIPTIONS, type HopFigures } from './hops.js';
import { floorOf, PATHS } from './paths.js';

export function renderHops(
  figures: readonly HopFigures[],
  machine: CompareMachine,
  run: { count: number; idleGapMs: number },
): string {
  const lines = [
    '# Hop floor',
    '',
    `${machine.cpu}, ${machine.cores} cores, ${machine.os}; node ${machine.node}, ` +
      `nats-server ${machine.nats}, Postgres ${machine.postgres} (${machine.postgresCommit}); ` +
      `load ${formatNumber(machine.loadAtStart, 2)} → ${formatNumber(machine.loadAtEnd, 2)}; ` +
      `${describeMemoryMonitor(machine)}. ` +
      `${run.count} passes of each hop idle (${run.idleGapMs} ms apart) and ${run.count} busy ` +
      '(back to back); CPU from 10 times as many back-to-back passes, this process’s and the far ' +
      'side’s (the gRPC server, the Postgres backend, nats-server, whose CPU counts all its ' +
      'traffic: keep the machine quiet).',
    '',
    '| Hop | What | Idle p50 / p95 / p99 (ms) | Busy p50 / p95 / p99 (ms) | CPU per pass, here / far side (ms) |',
    '| --- | --- | ---: | ---: | ---: |',
    ...figures.map(
      (hop) =>
        `| ${hop.name} | ${HOP_DESCRIPTIONS[hop.name]} | ${spread(hop.idle)} | ${spread(hop.busy)} | ` +
        `${formatNumber(hop.cpu.clientMs, 3)} / ${formatNumber(hop.cpu.serverMs, 3)} |`,
    ),
    '',
  ];
  for (const path of PATHS) {
    if (!path.legs.every((leg) => figures.some((hop) => hop.name === leg.hop))) continue;
    lines.push(
      `**${path.description}**: floor ${formatNumber(floorOf(path, figures), 1)} ms ` +
        '(the sum of its legs’ idle medians)',
      '',
      ...path.legs.map(
        (leg) => `- ${leg.share === 1 ? '' : `${leg.share} × `}${leg.hop}: ${leg.what}`,
      ),
      '',
    );
  }
  return `${lines.join('\n')}`;
}

function spread(summary: LatencySummary): string {
  return [summary.p50, summary.p95, summary.p99].map((v) => formatNumber(v, 2)).join(' / ');
}

/**
 * The three-step table of results.md (scenarios/three-step.ts): per system the chains enqueued and
 * completed per second, steps per second, the time per step (processing time per chain ÷ 3) and,
 * when drain ran in the same command, the one-step drain's time per job and the ratio of the two;
 * the start-to-start time between a chain's steps; who ran it on what.
 */
import { figureValue, formatNumber } from './report-format.js';
import { ok, type ScenarioResult } from './scenario.js';

/** A time in ms with the digits a sub-millisecond value needs. */
function ms(value: number | undefined): string {
  return formatNumber(value, value !== undefined && value < 10 ? 2 : 1);
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

export function threeStepTable(results: readonly ScenarioResult[]): string[] {
  const lines = [
    '| System | Durability | Chains | Concurrency per step | Enqueue (chains/s) | Chains/s | Steps/s | Time per chain ÷ 3 (ms) | Drain time per job (ms) | Step ÷ drain job | Step → next step p50 / p95 / p99 (ms) | Exactly once, in order | Versions |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |',
  ];
  for (const r of results) {
    const good = ok(r);
    const cell = (text: string) => (good ? text : 'failed');
    const hops = ['hop_p50', 'hop_p95', 'hop_p99']
      .map((key) => ms(figureValue(r, key)))
      .join(' / ');
    lines.push(
      `| ${r.system.name} | ${r.system.durability} | ${r.count} | ${r.concurrency} | ` +
        `${cell(formatNumber(figureValue(r, 'enqueue_rate'), 0))} | ${cell(formatNumber(figureValue(r, 'chain_rate'), 1))} | ` +
        `${cell(formatNumber(figureValue(r, 'step_rate'), 1))} | ${cell(ms(figureValue(r, 'ms_per_step')))} | ` +
        `${cell(ms(figureValue(r, 'drain_ms_per_job')))} | ${cell(formatNumber(figureValue(r, 'step_vs_drain'), 2))} | ` +
        `${cell(hops)} | ${good ? 'yes' : `**FAILED**: ${escapeCell(r.failure ?? '')}`} | ` +
        `${escapeCell(
          Object.entries(r.versions)
            .map(([name, version]) => `${name} ${version}`)
            .join(', '),
        )} |`,
    );
  }
  return lines;
}

/** What every table of results.md (report.ts and its per-scenario modules) reads and prints. */
import type { ScenarioResult } from './scenario.js';

/** The value of the figure `key` of a result, or undefined when it has none. */
export function figureValue(result: ScenarioResult, key: string): number | undefined {
  return result.figures.find((f) => f.key === key)?.value;
}

/** A number with thousands separators and `digits` decimals; `–` for none. */
export function formatNumber(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/**
 * `sluice pressure`, `sluice pressure override <kind> <target> <value> --reason <text> [--ttl <d>]`
 * and `sluice pressure clear <id>` (admin key): the governor's backpressure as operators see it,
 * and their manual overrides of it.
 */
import { fromDuration } from '@sluice/api';
import type { AdminClient } from '@sluice/sdk/client';
import { UsageError, type Command } from '../command.js';
import {
  formatDuration,
  formatRelative,
  formatTimestamp,
  oneLine,
  priorityWord,
} from '../format.js';

type PressureResponse = Awaited<ReturnType<AdminClient['getPressure']>>;
type Decision = NonNullable<PressureResponse['decision']>;
type Override = PressureResponse['overrides'][number];
type OverrideKind = Parameters<AdminClient['setOverride']>[0]['kind'];

const OVERRIDE_KINDS: Readonly<Record<string, OverrideKind>> = {
  breaker: 'OVERRIDE_KIND_BREAKER',
  priority: 'OVERRIDE_KIND_PRIORITY',
  limit: 'OVERRIDE_KIND_LIMIT',
};

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** `90s`, `10m`, `1h30m`, `2d` as milliseconds (at least 1 s). */
export function parseTtl(text: string, option = '--ttl'): number {
  const trimmed = text.trim();
  const parts = [...trimmed.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  const ms = parts.reduce((sum, [, n, unit]) => sum + Number(n) * (UNIT_MS[unit ?? ''] ?? 0), 0);
  if (parts.map((p) => p[0]).join('') !== trimmed || !Number.isSafeInteger(ms) || ms < 1_000) {
    throw new UsageError(`${option} must be a duration like 90s, 10m or 1h30m (got "${text}")`);
  }
  return ms;
}

/** `p1`, `P1`, `1` → `1`, the target of a priority override; other targets as given. */
function overrideTarget(kind: string, target: string): string {
  return kind === 'priority' ? target.trim().replace(/^p/i, '') : target;
}

/** `PRESSURE_LEVEL_HOLD` → `hold`; likewise for breaker statuses and override kinds. */
function enumWord(value: string | number, prefix: string): string {
  if (typeof value === 'number') return String(value);
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value;
}

function priorities(list: readonly (string | number)[]): string {
  return list.length === 0 ? '-' : list.map(priorityWord).join(', ');
}

/** A signal value: at most three decimals, no trailing zeros. */
function formatValue(value: number): string {
  return String(Number(value.toFixed(3)));
}

/** Lays rows out in columns (the last column is not padded). */
function table(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

function decisionLines(decision: Decision | null, stale: boolean, now: Date): string[] {
  if (decision === null) {
    return ['level      unknown: no governor decision yet (services admit as if ungoverned)'];
  }
  const decided = decision.decide_time
    ? formatRelative(decision.decide_time, now)
    : 'at an unknown time';
  const limits = decision.limits.map((l) => `${l.resource}=${l.limit}`).join(', ');
  const retry = decision.retry_after
    ? ` (retry after ${formatDuration(fromDuration(decision.retry_after))})`
    : '';
  const lines = [
    `level      ${enumWord(decision.level, 'PRESSURE_LEVEL_')}  decided ${decided} by ${decision.holder} (epoch ${decision.epoch})`,
    ...(stale
      ? ['           STALE: no governor is acting on it; services admit as if ungoverned']
      : []),
    `holds      ${priorities(decision.holds)}`,
    `rejects    ${priorities(decision.rejects)}${retry}`,
    `throttles  ${priorities(decision.throttles)}`,
    `degrade    ${priorities(decision.degrades)}`,
    `limits     ${limits === '' ? '-' : limits}`,
  ];
  const reasons = decision.reasons.map(oneLine);
  lines.push(`reasons    ${reasons.length === 0 ? '-' : reasons.join('; ')}`);
  if (decision.signals.length > 0) {
    lines.push(
      '',
      ...table([
        ['SIGNAL', 'SCOPE', 'VALUE', 'LEVEL'],
        ...decision.signals.map((s) => [s.signal, s.scope, formatValue(s.value), s.level]),
      ]),
    );
  }
  return lines;
}

function expiry(override: Override, now: Date): string {
  if (!override.expire_time) return 'until cleared';
  return `${formatTimestamp(override.expire_time)} (${formatRelative(override.expire_time, now)})`;
}

/**
 * What `sluice pressure` shows: the decision, its signals, the breakers, the overrides and the
 * urgent-wait guard's caps.
 */
export function renderPressure(response: PressureResponse, now: Date): string {
  const lines = decisionLines(response.decision, response.stale, now);
  lines.push('');
  if (response.breakers.length === 0) {
    lines.push('no breakers');
  } else {
    lines.push(
      ...table([
        ['BREAKER', 'STATUS', 'SINCE', 'COOL-DOWN ENDS', 'REASON'],
        ...response.breakers.map((b) => [
          b.resource,
          enumWord(b.status, 'BREAKER_STATUS_'),
          formatTimestamp(b.change_time),
          b.cool_down_end_time ? formatRelative(b.cool_down_end_time, now) : '-',
          b.reason === '' ? '-' : oneLine(b.reason),
        ]),
      ]),
    );
  }
  lines.push('');
  if (response.overrides.length === 0) {
    lines.push('no overrides');
  } else {
    lines.push(
      ...table([
        ['OVERRIDE', 'KIND', 'TARGET', 'VALUE', 'EXPIRES', 'REASON'],
        ...response.overrides.map((o) => [
          o.override_id,
          enumWord(o.kind, 'OVERRIDE_KIND_'),
          o.kind === 'OVERRIDE_KIND_PRIORITY' ? `P${o.target}` : o.target,
          o.value,
          expiry(o, now),
          oneLine(o.reason),
        ]),
      ]),
    );
  }
  lines.push('');
  if (response.guard_caps.length === 0) {
    lines.push('no urgent-wait caps');
  } else {
    lines.push(
      ...table([
        ['URGENT-WAIT CAP', 'P1-P3 IN FLIGHT'],
        ...response.guard_caps.map((g) => [g.resource, g.cap === 0 ? '0 (held)' : String(g.cap)]),
      ]),
    );
  }
  return lines.join('\n');
}

const showPressure: Command = {
  name: 'pressure',
  args: [],
  options: {},
  usage: '',
  summary: "show the governor's backpressure: level, signals, breakers, overrides (admin key)",
  help: ['--json  the GetPressure response as JSON'],
  async run(context) {
    const response = await context.admin().getPressure();
    context.output.out(
      context.json ? JSON.stringify(response, null, 2) : renderPressure(response, context.now()),
    );
    return 0;
  },
};

const setOverride: Command = {
  name: 'pressure override',
  args: ['kind', 'target', 'value'],
  options: { reason: { type: 'string' }, ttl: { type: 'string' } },
  usage: '<breaker|priority|limit> <target> <value> --reason <text> [--ttl <duration>]',
  summary: "force the governor's hand: a breaker, a priority or a limit (admin key)",
  help: [
    'breaker <resource> open|closed   force a breaker open or closed',
    'priority <P0-P3> hold|release    hold or release a priority',
    'limit <resource> <n>             pin the in-flight limit of a resource',
    '--reason <text>                  why (required; kept with the override)',
    '--ttl <duration>                 e.g. 90s, 10m, 1h30m (default: until cleared)',
    '--json                           the SetOverride response as JSON',
  ],
  async run(context) {
    const [kindWord = '', target = '', value = ''] = context.args;
    const kind = OVERRIDE_KINDS[kindWord.toLowerCase()];
    if (kind === undefined) {
      throw new UsageError(`<kind> must be breaker, priority or limit (got "${kindWord}")`);
    }
    const reason = context.option('reason');
    if (reason === undefined || reason.trim() === '') {
      throw new UsageError('--reason is required: say why, for the people who come after');
    }
    const ttl = context.option('ttl');
    const response = await context.admin().setOverride({
      kind,
      target: overrideTarget(kindWord.toLowerCase(), target),
      value: value.toLowerCase(),
      reason,
      ...(ttl === undefined ? {} : { ttlMs: parseTtl(ttl) }),
    });
    const { override } = response;
    if (context.json) {
      context.output.out(JSON.stringify(response, null, 2));
      return 0;
    }
    const until = override.expire_time
      ? `until ${formatTimestamp(override.expire_time)} (${formatRelative(override.expire_time, context.now())})`
      : 'until cleared';
    context.output.out(
      `override ${override.override_id} set: ${enumWord(override.kind, 'OVERRIDE_KIND_')} ` +
        `${override.target} ${override.value} ${until}; ` +
        `clear it: sluice pressure clear ${override.override_id}`,
    );
    return 0;
  },
};

const clearOverride: Command = {
  name: 'pressure clear',
  args: ['id'],
  options: {},
  usage: '<id>',
  summary: 'clear an override; the governor decides alone again (admin key)',
  help: ['--json  the ClearOverride response as JSON'],
  async run(context) {
    const [id = ''] = context.args;
    const response = await context.admin().clearOverride(id);
    context.output.out(context.json ? JSON.stringify(response, null, 2) : `cleared override ${id}`);
    return 0;
  },
};

export const pressureCommands: readonly Command[] = [showPressure, setOverride, clearOverride];

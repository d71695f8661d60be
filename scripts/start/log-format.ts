/**
 * The services' JSON log lines (pino: `level`, `time`, `service`, `msg` and fields) turned into one
 * readable line each for `npm start`:
 *
 *     01:02:03.456  gateway             info   gateway started  grpc_port=50051 metrics_port=40123
 *
 * Lines that are not JSON pass through unchanged after the service name. The stack of an error
 * logged at level error or fatal follows its line, indented.
 */
import { paint, type Style } from '../lib/terminal.js';

/** Fields shown in the fixed columns (or not at all), never repeated as `key=value`. */
const FIXED_FIELDS = new Set(['level', 'time', 'service', 'msg', 'pid', 'hostname', 'v']);

/** pino's numeric levels, for lines written without level labels. */
const LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

const LEVEL_STYLES: Readonly<Record<string, Style>> = {
  trace: 'dim',
  debug: 'dim',
  warn: 'yellow',
  error: 'red',
  fatal: 'red',
};

/** Formats the lines of services whose names are all known up front (for the name column). */
export class LogFormatter {
  private readonly nameWidth: number;
  private readonly styles = new Map<string, Style>();

  constructor(names: readonly string[]) {
    this.nameWidth = Math.max(...names.map((name) => name.length));
    const palette: readonly Style[] = ['cyan', 'magenta', 'blue', 'green', 'yellow'];
    names.forEach((name, i) => this.styles.set(name, palette[i % palette.length] ?? 'cyan'));
  }

  /** One line of output of service `name`, readable. */
  format(name: string, line: string): string {
    const record = parseRecord(line);
    const who = paint(this.styles.get(name) ?? 'cyan', name.padEnd(this.nameWidth));
    if (record === undefined) return `${' '.repeat(12)}  ${who}  ${line}`;

    const level = levelName(record['level']);
    const levelText = level.padEnd(5);
    const fields = Object.entries(record)
      .filter(([key]) => !FIXED_FIELDS.has(key) && key !== 'err')
      .map(([key, value]) => `${key}=${fieldText(value)}`);
    const error = errorParts(record['err']);
    if (error) fields.push(`err=${JSON.stringify(error.summary)}`);
    const head = [
      paint('dim', clockTime(record['time'])),
      who,
      LEVEL_STYLES[level] ? paint(LEVEL_STYLES[level], levelText) : levelText,
      typeof record['msg'] === 'string' ? record['msg'] : '',
      fields.length > 0 ? paint('dim', fields.join(' ')) : '',
    ]
      .join('  ')
      .trimEnd();
    // Stacks only for errors: warnings (a lease hiccup, a retry) stay one line each.
    if (!error?.stack || (level !== 'error' && level !== 'fatal')) return head;
    return [head, ...error.stack.map((frame) => paint('dim', `${' '.repeat(16)}${frame}`))].join(
      '\n',
    );
  }
}

function parseRecord(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

function levelName(level: unknown): string {
  if (typeof level === 'string') return level;
  if (typeof level === 'number') return LEVEL_NAMES[level] ?? String(level);
  return '';
}

/** `HH:MM:SS.mmm` in local time, from an ISO string or epoch milliseconds. */
function clockTime(time: unknown): string {
  const date = typeof time === 'string' || typeof time === 'number' ? new Date(time) : new Date();
  const valid = Number.isNaN(date.getTime()) ? new Date() : date;
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(valid.getHours())}:${pad(valid.getMinutes())}:${pad(valid.getSeconds())}.${pad(valid.getMilliseconds(), 3)}`;
}

/** A field's value: plain when it is a simple word or number, JSON otherwise. */
function fieldText(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) {
    return String(value);
  }
  if (typeof value === 'string' && /^[\w.:/@+-]+$/.test(value)) return value;
  return JSON.stringify(value);
}

/** pino's serialized error (`{ type, message, stack }`) as a summary and the stack's frames. */
function errorParts(err: unknown): { summary: string; stack: string[] | undefined } | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { type, message, stack } = err as { type?: unknown; message?: unknown; stack?: unknown };
  const text = typeof message === 'string' ? message : JSON.stringify(message ?? '');
  const summary = `${typeof type === 'string' ? type : 'Error'}: ${text}`;
  const frames =
    typeof stack === 'string'
      ? stack
          .split('\n')
          .slice(1)
          .map((frame) => frame.trim())
      : undefined;
  return { summary, stack: frames && frames.length > 0 ? frames : undefined };
}

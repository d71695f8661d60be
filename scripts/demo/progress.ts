/**
 * How the demo shows tasks to people: short ids, priority and status labels, and one aligned line
 * per task event as the events arrive from `WatchTask`.
 */
import type { Priority, TaskEvent, TaskStatus } from '@sluice/api';
import { paint, shorten, type Style } from '../lib/terminal.js';

/** The first 8 hex digits of a task id: unique enough to tell a demo's tasks apart. */
export function shortId(taskId: string): string {
  return taskId.slice(0, 8);
}

/** `PRIORITY_P1` → `P1`. */
export function priorityText(priority: Priority): string {
  return priority.replace(/^PRIORITY_/, '');
}

/** `TASK_STATUS_FAILED_TERMINAL` → `failed_terminal`; the unspecified status (no change) → `''`. */
export function statusText(status: TaskStatus): string {
  return status === 'TASK_STATUS_UNSPECIFIED'
    ? ''
    : status.replace(/^TASK_STATUS_/, '').toLowerCase();
}

/** The colour of a status: green done, red failed, yellow stopped, blue in progress. */
export function statusStyle(status: TaskStatus): Style | undefined {
  switch (status) {
    case 'TASK_STATUS_SUCCEEDED':
      return 'green';
    case 'TASK_STATUS_FAILED_TERMINAL':
    case 'TASK_STATUS_FAILED_RETRYABLE':
      return 'red';
    case 'TASK_STATUS_CANCELLED':
    case 'TASK_STATUS_PAUSED':
    case 'TASK_STATUS_WAITING_APPROVAL':
      return 'yellow';
    case 'TASK_STATUS_QUEUED':
    case 'TASK_STATUS_RUNNING':
      return 'blue';
    default:
      return undefined;
  }
}

/** Seconds from `since` to `at` (`performance.now()` values; `at` defaults to now), as `+1.234s`. */
export function elapsed(since: number, at = performance.now()): string {
  return `+${((at - since) / 1000).toFixed(3)}s`;
}

/** Widths of the columns of event lines; {@link TIME_COLUMN} is the first one's. */
const COLUMNS = { time: 8, task: 8, priority: 3, event: 16, status: 16, step: 12 } as const;
export const TIME_COLUMN = COLUMNS.time;
/** Longest details text of an event line. */
const DETAILS_WIDTH = 72;

/** The header of the event lines. */
export function eventHeader(): string {
  return paint(
    'bold',
    [
      'time'.padEnd(COLUMNS.time),
      'task'.padEnd(COLUMNS.task),
      'pri'.padEnd(COLUMNS.priority),
      'event'.padEnd(COLUMNS.event),
      'status'.padEnd(COLUMNS.status),
      'step'.padEnd(COLUMNS.step),
      'details',
    ].join('  '),
  );
}

/**
 * One line for one event of a task: when (since `since`), which task, its priority, what
 * happened, the status it led to (blank for events that change no status), the step concerned and
 * the details of the event's data (see {@link eventDetails}).
 */
export function eventLine(since: number, priority: Priority, event: TaskEvent): string {
  const status = statusText(event.to_status);
  const style = statusStyle(event.to_status);
  const paddedStatus = status.padEnd(COLUMNS.status);
  return [
    paint('dim', elapsed(since).padEnd(COLUMNS.time)),
    paint('cyan', shortId(event.task_id).padEnd(COLUMNS.task)),
    priorityText(priority).padEnd(COLUMNS.priority),
    event.type.padEnd(COLUMNS.event),
    style ? paint(style, paddedStatus) : paddedStatus,
    (event.step || '-').padEnd(COLUMNS.step),
    paint('dim', shorten(eventDetails(event.data), DETAILS_WIDTH)),
  ]
    .join('  ')
    .trimEnd();
}

/** `fetchPage ×3` for three steps of one name, `a, b` for different ones. */
export function stepGroupText(names: readonly string[]): string {
  const distinct = [...new Set(names)];
  return distinct.length === 1 && names.length > 1
    ? `${distinct[0]} ×${names.length}`
    : distinct.join(', ');
}

/**
 * What an event's `data` (JSON text) adds for people, on one line: a step's progress, the steps
 * started next (a fan-out as `→ fetchPage ×3`), the branch of a fan-out that finished and the join
 * it started, the approval asked for, the comment or reason given, the error. `''` when nothing.
 */
export function eventDetails(data: string): string {
  if (data === '') return '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return data;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return '';
  const record = parsed as Record<string, unknown>;
  const text = (key: string) => {
    const value = record[key];
    return typeof value === 'string' ? value : '';
  };
  const details: string[] = [];
  const progress = record['progress'];
  if (typeof progress === 'number') {
    details.push([`${Math.round(progress * 100)}%`, text('message')].filter(Boolean).join(' '));
  }
  const next = record['next'];
  if (Array.isArray(next) && next.length > 0) {
    const names = next.filter((name): name is string => typeof name === 'string');
    details.push(`→ ${stepGroupText(names)}${names.length > 1 ? ' in parallel' : ''}`);
  }
  const branch = record['branch'];
  if (typeof branch === 'number') {
    // The join starts with the first outcome applied once every branch has succeeded, which is
    // not always the last branch's: say that it started, not which branch was last.
    details.push(`branch ${branch + 1} done${text('join') ? ` · join → ${text('join')}` : ''}`);
  }
  // The prompt's first line is its question; the rest (the outline) is for `sluice get`.
  if (text('prompt')) details.push(`asks: ${text('prompt').split('\n')[0] ?? ''}`);
  if (text('comment')) details.push(`comment "${text('comment')}"`);
  if (text('reason')) details.push(`reason "${text('reason')}"`);
  const errorClass = text('error_class');
  if (errorClass) details.push(`${errorClass}: ${text('message')}`);
  if (text('error')) details.push(text('error'));
  return details.join(' · ');
}

/**
 * A line for a call the demo made (`CreateTask`, `CancelTask` …), in the columns of the event
 * lines: the method where the event goes, its answer where the status goes, and a note.
 */
export function callLine(
  since: number,
  taskId: string,
  priority: Priority,
  method: string,
  answer: string,
  note: string,
): string {
  return [
    paint('dim', elapsed(since).padEnd(COLUMNS.time)),
    paint('cyan', shortId(taskId).padEnd(COLUMNS.task)),
    priorityText(priority).padEnd(COLUMNS.priority),
    paint('magenta', `${method} ›`.padEnd(COLUMNS.event)),
    paint('magenta', answer.padEnd(COLUMNS.status)),
    paint('dim', note),
  ].join('  ');
}

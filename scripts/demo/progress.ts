/**
 * How the demo shows tasks to people: short ids, priority and status labels, and one aligned line
 * per task event as the events arrive from `WatchTask`.
 */
import type { Priority, TaskEvent, TaskStatus } from '@sluice/api';
import { paint, type Style } from '../lib/terminal.js';

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

/** Seconds since `since` (a `performance.now()` value), as `+1.234s`. */
export function elapsed(since: number): string {
  return `+${((performance.now() - since) / 1000).toFixed(3)}s`;
}

const COLUMNS = { time: 8, task: 8, priority: 3, event: 16, status: 16 } as const;

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
      'step',
    ].join('  '),
  );
}

/**
 * One line for one event of a task: when (since `since`), which task, its priority, what
 * happened, the status it led to (blank for events that change no status) and the step concerned.
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
    event.step || '-',
  ].join('  ');
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

/**
 * Text for people: a task's state as `sluice get` shows it, the live lines of `sluice watch`, the
 * table of `sluice list`, the answers of the lifecycle commands and error lines. Pure functions of
 * the API's messages (and of "now", for relative times), so every rendering is unit-tested.
 *
 * Times are UTC (ISO 8601 with `Z`) so that logs of CI machines in any zone line up.
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import {
  fromDuration,
  fromTimestamp,
  type ApiKey,
  type DeadLetter,
  type RedriveResult,
  type Task,
  type TaskStatus,
  type Tenant,
  type Timestamp,
} from '@sluice/api';
import { displayWidth, padToWidth } from './text-width.js';

const STATUS_PREFIX = 'TASK_STATUS_';
const PRIORITY_PREFIX = 'PRIORITY_';
const ERROR_CLASS_PREFIX = 'ERROR_CLASS_';

/** States nothing moves out of without a person asking (retry). */
const FINAL: ReadonlySet<string> = new Set([
  'TASK_STATUS_SUCCEEDED',
  'TASK_STATUS_FAILED_TERMINAL',
  'TASK_STATUS_CANCELLED',
]);

/** Whether the task reached a final state (succeeded, failed_terminal, cancelled). */
export function isFinal(status: TaskStatus | number): boolean {
  return typeof status === 'string' && FINAL.has(status);
}

/** `TASK_STATUS_WAITING_APPROVAL` → `waiting_approval` (an unknown number → `status 9`). */
export function statusWord(status: TaskStatus | number): string {
  if (typeof status === 'number') return `status ${status}`;
  if (status === 'TASK_STATUS_UNSPECIFIED') return '-';
  return status.slice(STATUS_PREFIX.length).toLowerCase();
}

/** `PRIORITY_P1` → `P1`. */
export function priorityWord(priority: string | number): string {
  if (typeof priority === 'number') return `priority ${priority}`;
  return priority.startsWith(PRIORITY_PREFIX) ? priority.slice(PRIORITY_PREFIX.length) : priority;
}

/** `ERROR_CLASS_TOOL_TIMEOUT` → `tool_timeout`. */
export function errorClassWord(errorClass: string | number): string {
  if (typeof errorClass === 'number') return `error class ${errorClass}`;
  return errorClass.startsWith(ERROR_CLASS_PREFIX)
    ? errorClass.slice(ERROR_CLASS_PREFIX.length).toLowerCase()
    : errorClass;
}

/**
 * A span of time for people: `850ms`, `4.2s`, `42s`, `3m 05s`, `2h 10m`, `3d 4h`. Negative spans
 * are shown by their size (callers say "ago").
 */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1_000) return `${Math.round(abs)}ms`;
  if (abs < 10_000) return `${(Math.floor(abs / 100) / 10).toFixed(1)}s`;
  const totalSeconds = Math.floor(abs / 1_000);
  if (totalSeconds < 60) return `${totalSeconds}s`;
  const totalMinutes = Math.floor(totalSeconds / 60);
  if (totalMinutes < 60) return `${totalMinutes}m ${String(totalSeconds % 60).padStart(2, '0')}s`;
  const totalHours = Math.floor(totalMinutes / 60);
  if (totalHours < 24) return `${totalHours}h ${String(totalMinutes % 60).padStart(2, '0')}m`;
  return `${Math.floor(totalHours / 24)}d ${totalHours % 24}h`;
}

/** A fraction 0…1 as a whole percentage (`0.425` → `43%`), clamped. */
export function formatPercent(fraction: number): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  return `${Math.round(clamped * 100)}%`;
}

/** A timestamp as ISO 8601 UTC without milliseconds; `-` when unset. */
export function formatTimestamp(timestamp: Timestamp | null): string {
  if (!timestamp) return '-';
  return fromTimestamp(timestamp)
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z');
}

/** A timestamp as `HH:MM:SSZ`, the time column of watch lines. */
export function formatTimeOfDay(timestamp: Timestamp | Date | null): string {
  if (!timestamp) return '--:--:--Z';
  const date = timestamp instanceof Date ? timestamp : fromTimestamp(timestamp);
  return `${date.toISOString().slice(11, 19)}Z`;
}

/** `in 3m 05s` or `4s ago`, relative to `now`. */
export function formatRelative(timestamp: Timestamp, now: Date): string {
  const delta = fromTimestamp(timestamp).getTime() - now.getTime();
  return delta >= 0 ? `in ${formatDuration(delta)}` : `${formatDuration(delta)} ago`;
}

/** Text on one line: line breaks and the indentation after them become one space. */
export function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}

/** `"text"` on one line, with inner quotes escaped. */
function quote(text: string): string {
  return JSON.stringify(oneLine(text));
}

/** The progress of a step: `42% "drafting the outline"`, or `''` when nothing was reported. */
export function formatProgress(progress: number, message: string): string {
  if (progress <= 0 && message === '') return '';
  const percent = formatPercent(progress);
  return message === '' ? percent : `${percent} ${quote(message)}`;
}

/** Where a queued task stands: `position 3 · estimated wait ~12s`. */
export function formatQueue(task: Pick<Task, 'queue_position' | 'estimated_wait'>): string {
  const position =
    task.queue_position === 0 ? 'next in line' : `${task.queue_position} ahead in the queue`;
  const wait = task.estimated_wait
    ? `estimated wait ~${formatDuration(fromDuration(task.estimated_wait))}`
    : 'no wait estimate yet';
  return `${position} · ${wait}`;
}

const APPROVAL_TIMEOUT_WORDS: Record<string, string> = {
  APPROVAL_TIMEOUT_ACTION_PAUSE: 'the task is paused',
  APPROVAL_TIMEOUT_ACTION_CANCEL: 'the task is cancelled',
};

/**
 * What the task's error says: `tool_timeout: the fetch timed out`, plus `(retried automatically)`
 * while the task waits for its backoff (a failed_terminal task's retries are over).
 */
export function formatTaskError(error: NonNullable<Task['error']>, status: Task['status']): string {
  const retry =
    error.retryable && status === 'TASK_STATUS_FAILED_RETRYABLE' ? ' (retried automatically)' : '';
  return `${errorClassWord(error.error_class)}: ${error.message}${retry}`;
}

/** The state with the requests still pending on it: `running, cancel requested`. */
export function formatState(task: Task): string {
  const requests = [
    task.cancel_requested ? 'cancel requested' : '',
    task.pause_requested ? 'pause requested' : '',
  ].filter((r) => r !== '');
  return [statusWord(task.status), ...requests].join(', ');
}

/** The width of the label column of {@link renderTask}. */
const LABEL_WIDTH = 10;

function field(label: string, value: string): string[] {
  const [first = '', ...rest] = value.split('\n');
  const pad = ' '.repeat(LABEL_WIDTH);
  return [`${label.padEnd(LABEL_WIDTH)}${first}`, ...rest.map((line) => `${pad}${line}`)];
}

/** The output of a task, pretty-printed; the raw text when it is not JSON. */
function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * A task for people (`sluice get`): state and step, progress, queue position and estimated wait
 * of a queued task, the pending approval, the error, what can be done next (with the command to
 * do it), the trace id, times and the output.
 */
export function renderTask(task: Task, now: Date): string {
  const id = task.task_id;
  const lines: string[] = [
    ...field('task', id),
    ...field('type', `${task.type} (version ${task.type_version})`),
    ...field('priority', priorityWord(task.priority)),
    ...field('state', formatState(task)),
  ];
  if (task.current_step !== '') lines.push(...field('step', task.current_step));
  const progress = formatProgress(task.progress, task.progress_message);
  if (progress !== '') lines.push(...field('progress', progress));
  lines.push(...field('attempt', String(task.attempt)));
  if (task.status === 'TASK_STATUS_QUEUED') lines.push(...field('queue', formatQueue(task)));
  // Why its next step waits beyond its turn: an open breaker, a governor hold, the guard.
  if (task.waiting_for !== '') lines.push(...field('waiting', task.waiting_for));
  if (task.approval) {
    const approval = task.approval;
    // The prompt as its step wrote it, lines and all: it is what the person decides on.
    lines.push(...field('approval', approval.prompt));
    if (approval.step !== '') lines.push(...field('asked by', `step ${approval.step}`));
    if (approval.deadline) {
      const then = APPROVAL_TIMEOUT_WORDS[approval.on_timeout];
      const outcome = then ? `; then ${then}` : '';
      lines.push(
        ...field(
          'deadline',
          `${formatTimestamp(approval.deadline)} (${formatRelative(approval.deadline, now)})${outcome}`,
        ),
      );
    }
    if (task.status === 'TASK_STATUS_WAITING_APPROVAL') {
      lines.push(
        ...field('answer', `sluice approve ${id} [--comment <text>]`),
        ...field('', `sluice reject ${id} [--comment <text>]`),
      );
    }
  }
  if (task.error) lines.push(...field('error', formatTaskError(task.error, task.status)));
  lines.push(
    ...field('cancel', task.can_cancel ? `possible: sluice cancel ${id}` : 'not possible'),
  );
  if (task.status === 'TASK_STATUS_PAUSED') lines.push(...field('resume', `sluice resume ${id}`));
  if (task.status === 'TASK_STATUS_FAILED_TERMINAL' || task.status === 'TASK_STATUS_CANCELLED') {
    lines.push(...field('retry', `sluice retry ${id}  (steps that succeeded are not run again)`));
  }
  if (task.trace_id !== '') lines.push(...field('trace', task.trace_id));
  if (task.idempotency_key !== '') lines.push(...field('key', task.idempotency_key));
  lines.push(...field('created', formatTimestamp(task.create_time)));
  if (task.start_time) lines.push(...field('started', formatTimestamp(task.start_time)));
  if (task.finish_time) {
    const took =
      task.create_time === null
        ? ''
        : ` (${formatDuration(
            fromTimestamp(task.finish_time).getTime() - fromTimestamp(task.create_time).getTime(),
          )} after creation)`;
    lines.push(...field('finished', `${formatTimestamp(task.finish_time)}${took}`));
  }
  if (task.output !== '') lines.push(...field('output', prettyJson(task.output)));
  return lines.join('\n');
}

/** An ISO time from event data without its milliseconds; other text as it is. */
function isoWithoutMillis(text: string): string {
  return text.replace(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+Z$/, '$1Z');
}

/**
 * The parts of an event's `data` a person wants to see, in a fixed order: progress, the steps
 * started next, the attempt (from the second on), the approval asked for, the error, the reason
 * and the comment. Fields it does not know are left out (`--json` shows everything).
 */
export function eventDataDetails(data: string): string[] {
  if (data === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return [data];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return [];
  const record = parsed as Record<string, unknown>;
  const text = (key: string) => (typeof record[key] === 'string' ? record[key] : '');
  const details: string[] = [];
  if (typeof record['progress'] === 'number') {
    details.push(formatProgress(record['progress'], text('message')) || '0%');
  }
  const nextSteps = record['next'];
  if (Array.isArray(nextSteps) && nextSteps.length > 0) {
    const names = nextSteps.filter((n): n is string => typeof n === 'string');
    details.push(
      names.length > 1
        ? `next ${names.length} in parallel: ${names.join(', ')}`
        : `next ${names.join('')}`,
    );
  }
  if (typeof record['branch'] === 'number') details.push(`branch ${record['branch']}`);
  if (text('join') !== '') details.push(`join ${text('join')}`);
  if (typeof record['attempt'] === 'number' && record['attempt'] > 1) {
    details.push(`attempt ${record['attempt']}`);
  }
  if (text('prompt') !== '') details.push(`asks ${quote(text('prompt'))}`);
  if (text('deadline') !== '') details.push(`deadline ${isoWithoutMillis(text('deadline'))}`);
  // A step's failure carries its message as `error`; the task's failure its class and message.
  const errorClass = text('error_class') || text('errorClass');
  if (errorClass !== '') details.push(`error ${errorClassWord(errorClass)}: ${text('message')}`);
  if (text('error') !== '') details.push(`error ${oneLine(text('error'))}`);
  if (text('reason') !== '') details.push(`reason ${quote(text('reason'))}`);
  if (text('comment') !== '') details.push(`comment ${quote(text('comment'))}`);
  return details;
}

/**
 * What a fresh snapshot of the task adds to a watch line: the queue standing of a queued task,
 * the progress of a running one, the approval asked for, the error of a failed one, why its next
 * step waits beyond its turn, pending requests. What the event's own details (`shown`) already
 * say is not repeated.
 */
export function snapshotDetails(task: Task, now: Date, shown: readonly string[] = []): string[] {
  const says = (pattern: RegExp) => shown.some((detail) => pattern.test(detail));
  const details: string[] = [];
  switch (task.status) {
    case 'TASK_STATUS_QUEUED':
      details.push(formatQueue(task));
      break;
    case 'TASK_STATUS_RUNNING': {
      const progress = formatProgress(task.progress, task.progress_message);
      if (progress !== '' && !says(/^\d+%/)) details.push(progress);
      break;
    }
    case 'TASK_STATUS_WAITING_APPROVAL':
      if (task.approval && !says(/^asks /)) {
        const deadline = task.approval.deadline
          ? `, deadline ${formatRelative(task.approval.deadline, now)}`
          : '';
        details.push(`approval ${quote(task.approval.prompt)}${deadline}`);
      }
      break;
    case 'TASK_STATUS_FAILED_TERMINAL':
    case 'TASK_STATUS_FAILED_RETRYABLE':
      if (task.error && !says(/^error /)) {
        details.push(`error ${formatTaskError(task.error, task.status)}`);
      }
      break;
    default:
      break;
  }
  if (task.waiting_for !== '') details.push(`waiting: ${task.waiting_for}`);
  if (task.cancel_requested) details.push('cancel requested');
  if (task.pause_requested) details.push('pause requested');
  return details;
}

/** One line of `sluice watch`. */
export interface WatchLine {
  /** When it happened (the event's time, or now for a refresh). */
  readonly time: Timestamp | Date | null;
  /** The event's sequence; absent for a refresh between events. */
  readonly seq?: string;
  /** The task's state after the event. */
  readonly state: TaskStatus | number;
  /** The event's type, or a word for a refresh. */
  readonly what: string;
  readonly step: string;
  readonly details: readonly string[];
}

/** `03:04:05Z  #3  running           step_started    outline  42% "drafting"`. */
export function renderWatchLine(line: WatchLine): string {
  const seq = line.seq === undefined ? '' : `#${line.seq}`;
  const parts = [
    formatTimeOfDay(line.time),
    seq.padEnd(4),
    statusWord(line.state).padEnd(16),
    line.what.padEnd(15),
    line.step === '' ? '-' : line.step,
    ...line.details.map(oneLine),
  ];
  return parts.join('  ').trimEnd();
}

/** The last line of a watch: how the task ended and what to do about it. */
export function renderWatchEnd(task: Task): string {
  return oneLine(watchEnd(task));
}

function watchEnd(task: Task): string {
  const id = task.task_id;
  const took =
    task.create_time && task.finish_time
      ? ` after ${formatDuration(
          fromTimestamp(task.finish_time).getTime() - fromTimestamp(task.create_time).getTime(),
        )}`
      : '';
  switch (task.status) {
    case 'TASK_STATUS_SUCCEEDED':
      return `task ${id} succeeded${took}; its output: sluice get ${id}`;
    case 'TASK_STATUS_FAILED_TERMINAL': {
      const error = task.error ? `: ${formatTaskError(task.error, task.status)}` : '';
      return `task ${id} failed${took}${error}; retry it: sluice retry ${id}`;
    }
    case 'TASK_STATUS_CANCELLED':
      return `task ${id} was cancelled${took}; retry it: sluice retry ${id}`;
    default:
      return `task ${id} is ${formatState(task)}`;
  }
}

/** Lays rows out in columns of terminal cells (the last column is not padded). */
function table(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, displayWidth(cell))));
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : padToWidth(cell, widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

/** The table of `sluice list`: one task per line, newest first as the API returns them. */
export function renderTaskTable(tasks: readonly Task[]): string {
  if (tasks.length === 0) return 'no tasks';
  const rows = tasks.map((task) => [
    task.task_id,
    task.type,
    priorityWord(task.priority),
    formatState(task),
    task.current_step === '' ? '-' : task.current_step,
    task.status === 'TASK_STATUS_RUNNING'
      ? formatPercent(task.progress)
      : task.status === 'TASK_STATUS_QUEUED' && task.estimated_wait
        ? `wait ~${formatDuration(fromDuration(task.estimated_wait))}`
        : '-',
    formatTimestamp(task.create_time),
  ]);
  return table([['TASK', 'TYPE', 'PRI', 'STATE', 'STEP', 'PROGRESS', 'CREATED'], ...rows]).join(
    '\n',
  );
}

/** The table of `sluice tenants list`. */
export function renderTenantTable(tenants: readonly Tenant[]): string {
  if (tenants.length === 0) return 'no tenants';
  const rows = tenants.map((t) => [t.tenant_id, formatTimestamp(t.create_time), t.display_name]);
  return table([['TENANT', 'CREATED', 'NAME'], ...rows]).join('\n');
}

/** The table of `sluice keys list`: revoked keys say since when. */
export function renderKeyTable(keys: readonly ApiKey[]): string {
  if (keys.length === 0) return 'no keys';
  const rows = keys.map((k) => [
    k.key_id,
    k.prefix,
    k.admin ? 'admin' : 'tenant',
    formatTimestamp(k.create_time),
    k.revoke_time ? `revoked ${formatTimestamp(k.revoke_time)}` : 'valid',
  ]);
  return table([['KEY', 'PREFIX', 'KIND', 'CREATED', 'STATE'], ...rows]).join('\n');
}

/** The table of `sluice dlq list`: what failed, why, and whether it was redriven. */
export function renderDeadLetterTable(letters: readonly DeadLetter[]): string {
  if (letters.length === 0) return 'no dead letters';
  const rows = letters.map((l) => [
    l.dead_letter_id,
    l.task_id,
    l.tenant_id,
    `${l.step} (#${l.step_seq})`,
    deadLetterReasonWord(l.reason),
    String(l.attempts),
    l.error ? oneLine(`${errorClassWord(l.error.error_class)}: ${l.error.message}`) : '',
    formatTimestamp(l.create_time),
    l.redrive_time
      ? `redriven ${formatTimestamp(l.redrive_time)}`
      : `waiting (task ${statusWord(l.task_status)})`,
  ]);
  return table([
    ['DEAD LETTER', 'TASK', 'TENANT', 'STEP', 'REASON', 'ATTEMPTS', 'ERROR', 'CREATED', 'STATE'],
    ...rows,
  ]).join('\n');
}

/** `DEAD_LETTER_REASON_ATTEMPTS_EXHAUSTED` → `attempts_exhausted`. */
export function deadLetterReasonWord(reason: string | number): string {
  const prefix = 'DEAD_LETTER_REASON_';
  if (typeof reason === 'number') return `reason ${reason}`;
  return reason.startsWith(prefix) ? reason.slice(prefix.length).toLowerCase() : reason;
}

/** One line per letter of `sluice dlq redrive`: redriven, or why not. */
export function renderRedriveResults(results: readonly RedriveResult[]): string {
  return results
    .map((r) =>
      r.redriven
        ? `redriven ${r.dead_letter_id}: task ${r.task_id} is queued again`
        : `not redriven ${r.dead_letter_id}: ${r.reason}`,
    )
    .join('\n');
}

/** The lifecycle requests `sluice` makes. */
export type TaskAction = 'cancel' | 'approve' | 'reject' | 'pause' | 'resume' | 'retry';

/** What a lifecycle request did, from the task the server answered with. */
export function renderActionResult(action: TaskAction, task: Task): string {
  const id = task.task_id;
  const now = `now ${formatState(task)}`;
  switch (action) {
    case 'cancel':
      return task.status === 'TASK_STATUS_CANCELLED'
        ? `cancelled task ${id}`
        : `cancel requested: task ${id} is cancelled once its running step has stopped (${now})`;
    case 'approve':
      return `approved task ${id} (${now})`;
    case 'reject':
      return `rejected task ${id} (${now})`;
    case 'pause':
      return task.status === 'TASK_STATUS_PAUSED'
        ? `paused task ${id}; resume it: sluice resume ${id}`
        : `pause requested: task ${id} pauses when its current step ends (${now})`;
    case 'resume':
      return `resumed task ${id} (${now})`;
    case 'retry':
      return `retrying task ${id}: attempt ${task.attempt} (${now})`;
  }
}

/** The name of a gRPC status code (`9` → `FAILED_PRECONDITION`). */
export function statusCodeName(code: number): string {
  return grpcStatus[code] ?? `STATUS_${code}`;
}

/** The error line of a refused call: `error: FAILED_PRECONDITION: <server message>`. */
export function renderServiceError(code: number, details: string): string {
  return `error: ${statusCodeName(code)}: ${details.trim()}`;
}

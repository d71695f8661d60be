/**
 * The table the demo ends with: one row per task with its final status, its steps, how long it
 * took, and an excerpt of its output or its error.
 */
import { fromTimestamp, type Task } from '@sluice/api';
import { priorityText, shortId, statusStyle, statusText } from './progress.js';
import { paint, renderTable, shorten, type Cell } from '../lib/terminal.js';

/** A step row of the task, as stored. */
export interface StepSummary {
  readonly name: string;
  readonly status: string;
}

/** Everything a summary row shows. */
export interface TaskSummary {
  readonly label: string;
  readonly task: Task;
  readonly steps: readonly StepSummary[];
  /** Why the result is not the expected one; `undefined` when it is. */
  readonly problem: string | undefined;
}

const STEP_MARKS: Readonly<Record<string, string>> = {
  succeeded: '✓',
  failed: '✗',
  cancelled: '⊘',
};

/**
 * `outline✓ fetchPage×3✓ summarize✓`: each step with a mark for how it ended (`…` while
 * unfinished), in step order; steps of one name in a row that ended alike (the branches of a
 * fan-out) are counted instead of repeated.
 */
export function stepsText(steps: readonly StepSummary[]): string {
  if (steps.length === 0) return '-';
  const runs: { name: string; marks: string[] }[] = [];
  for (const step of steps) {
    const mark = STEP_MARKS[step.status] ?? '…';
    const last = runs.at(-1);
    if (last?.name === step.name) last.marks.push(mark);
    else runs.push({ name: step.name, marks: [mark] });
  }
  return runs
    .map(({ name, marks }) =>
      marks.length > 1 && new Set(marks).size === 1
        ? `${name}×${marks.length}${marks[0] ?? ''}`
        : marks.map((mark) => `${name}${mark}`).join(' '),
    )
    .join(' ');
}

/** From creation to the final state, e.g. `0.53s`; `-` while the task has not finished. */
export function durationText(task: Task): string {
  if (task.create_time === null || task.finish_time === null) return '-';
  const ms = fromTimestamp(task.finish_time).getTime() - fromTimestamp(task.create_time).getTime();
  return `${(ms / 1000).toFixed(2)}s`;
}

/** The error of a failed task, or the gist of a succeeded task's output (the source and outline). */
export function resultText(task: Task): string {
  if (task.error !== null) {
    const errorClass = task.error.error_class.replace(/^ERROR_CLASS_/, '').toLowerCase();
    return `${errorClass}: ${task.error.message}`;
  }
  if (task.output === '') return '-';
  try {
    const output = JSON.parse(task.output) as {
      outline?: unknown;
      source?: { title?: unknown; status?: unknown };
    };
    const title = typeof output.source?.title === 'string' ? output.source.title : undefined;
    const outline = typeof output.outline === 'string' ? output.outline : undefined;
    return [title && `[${title}]`, outline].filter(Boolean).join(' ') || task.output;
  } catch {
    return task.output;
  }
}

/** The summary table, sized to `width` columns (the result column is shortened to fit). */
export function summaryTable(rows: readonly TaskSummary[], width: number): string {
  const header = ['task', 'pri', 'what', 'final status', 'steps', 'took', 'ok', 'output or error'];
  const cells = rows.map((row): Cell[] => {
    const status = statusText(row.task.status) || 'unfinished';
    const style = statusStyle(row.task.status);
    return [
      { text: shortId(row.task.task_id), style: 'cyan' },
      { text: priorityText(row.task.priority) },
      { text: row.label },
      style ? { text: status, style } : { text: status },
      { text: stepsText(row.steps) },
      { text: durationText(row.task) },
      row.problem === undefined ? { text: '✓', style: 'green' } : { text: '✗', style: 'red' },
      { text: resultText(row.task) },
    ];
  });
  // Every column but the last is as wide as its widest cell; the last gets what is left.
  const fixed = header
    .slice(0, -1)
    .map((title, i) => Math.max(title.length, ...cells.map((row) => row[i]?.text.length ?? 0)))
    .reduce((sum, w) => sum + w + 2, 0);
  const room = Math.max(30, width - fixed);
  const fitted = cells.map((row) =>
    row.map((cell, i) =>
      i === row.length - 1 ? { ...cell, text: shorten(cell.text, room) } : cell,
    ),
  );
  const problems = rows
    .filter((row) => row.problem !== undefined)
    .map((row) => paint('red', `  ✗ ${shortId(row.task.task_id)} ${row.label}: ${row.problem}`));
  return [renderTable(header, fitted), ...problems].join('\n');
}

/**
 * What the sample tasks produced, for the end of the demo: per task its final state, its steps
 * (a fan-out shows as `fetchPage×3✓`) and the gist of its output, judged against the plan.
 */
import type { Task } from '@sluice/api';
import { parseFields } from './json-fields.js';
import { shortId, statusStyle, statusText } from './progress.js';
import type { SampleFacts, SampleTask } from './samples.js';
import { durationText, resultText, stepsText, type StepSummary } from './summary.js';
import { paint, shorten } from '../lib/terminal.js';

/** A sample task at the end of the demo. */
export interface SampleSummary {
  readonly sample: SampleTask;
  readonly task: Task;
  readonly steps: readonly StepSummary[];
  readonly facts: SampleFacts;
}

/** Width of the labels of the detail lines. */
const LABEL_WIDTH = 10;

/** The report's lines and what is not as planned (`<short id> <type>: <problem>`). */
export interface SampleReport {
  readonly lines: readonly string[];
  readonly problems: readonly string[];
}

/** The report of every sample task, its lines fitted to `width` columns. */
export function sampleReport(summaries: readonly SampleSummary[], width: number): SampleReport {
  const lines: string[] = [];
  const problems: string[] = [];
  for (const { sample, task, steps, facts } of summaries) {
    const id = shortId(task.task_id);
    const succeeded = task.status === 'TASK_STATUS_SUCCEEDED';
    const explained = succeeded ? sample.explain(parseFields(task.output), facts) : undefined;
    const taskProblems = explained
      ? explained.problems
      : [`expected succeeded, ended ${statusText(task.status) || 'unfinished'}`];
    problems.push(...taskProblems.map((problem) => `${id} ${sample.type}: ${problem}`));

    const status = statusText(task.status) || 'unfinished';
    const style = statusStyle(task.status);
    lines.push(
      [
        paint('cyan', id),
        paint('bold', sample.type),
        paint('dim', sample.label),
        style ? paint(style, status) : status,
        durationText(task),
        taskProblems.length === 0 ? paint('green', '✓') : paint('red', '✗'),
      ].join('  '),
    );
    const details: Array<readonly [string, string]> = [
      ['steps', stepsText(steps)],
      ...(explained ? explained.lines : [['error', resultText(task)] as const]),
    ];
    const room = Math.max(30, width - LABEL_WIDTH - 4);
    for (const [label, text] of details) {
      lines.push(`  ${paint('dim', label.padEnd(LABEL_WIDTH))}  ${shorten(text, room)}`);
    }
    for (const problem of taskProblems) lines.push(paint('red', `  ✗ ${problem}`));
  }
  return { lines, problems };
}

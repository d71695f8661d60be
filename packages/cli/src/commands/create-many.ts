/**
 * `sluice create <type> --inputs-file <file>`: one task per line of a JSON Lines file (a backfill,
 * an evaluation set), created through `CreateTasks` in batches of 500 — each batch all or none.
 * With `--idempotency-key <k>`, the task of line n gets the key `<k>:<n>`, so running the same
 * file again creates nothing twice (after a failure, just run it again).
 */
import type { CreateTaskParams } from '@sluice/sdk/client';
import { isServiceError } from '@sluice/sdk/client';
import type { Priority } from '@sluice/api';
import { UsageError, type CommandContext } from '../command.js';
import { statusWord } from '../format.js';

/** The most tasks one `CreateTasks` call takes. */
export const TASKS_PER_CALL = 500;

/** A line of the file that holds an input: its number (from 1) and its text. */
interface InputLine {
  readonly line: number;
  readonly input: string;
}

/** The non-blank lines of `text`, numbered as an editor numbers them. */
export function inputLines(text: string): InputLine[] {
  return text
    .split('\n')
    .map((input, index) => ({ line: index + 1, input: input.trim() }))
    .filter(({ input }) => input !== '');
}

/** Creates a task per line, prints one line per task (`--json`: one JSON object per line). */
export async function createMany(
  context: CommandContext,
  request: { type: string; priority: Priority; text: string; keyPrefix: string | undefined },
): Promise<number> {
  const lines = inputLines(request.text);
  if (lines.length === 0) throw new UsageError('--inputs-file holds no input (one JSON per line)');
  let created = 0;
  for (let start = 0; start < lines.length; start += TASKS_PER_CALL) {
    const batch = lines.slice(start, start + TASKS_PER_CALL);
    const params = batch.map(({ line, input }): CreateTaskParams => ({
      type: request.type,
      priority: request.priority,
      input,
      ...(request.keyPrefix === undefined
        ? {}
        : { idempotencyKey: `${request.keyPrefix}:${line}` }),
    }));
    const results = await context
      .tasks()
      .createTasks(params)
      .catch((error: unknown) => {
        throw withLineNumbers(error, batch, created);
      });
    results.forEach((response, index) => {
      const { line } = batch[index] as InputLine;
      if (response.created) created += 1;
      if (context.json) {
        context.output.out(JSON.stringify({ line, ...response }));
      } else if (response.created) {
        context.output.out(`line ${line}: created task ${response.task.task_id}`);
      } else {
        context.output.out(
          `line ${line}: task ${response.task.task_id} already exists ` +
            `(${statusWord(response.task.status)}); nothing was created`,
        );
      }
    });
  }
  if (!context.json) {
    context.output.err(`created ${created} of ${lines.length} tasks`);
  }
  return 0;
}

/**
 * The server names an entry of the batch (`tasks[3].input.topic: …`); the person at the terminal
 * wants the line of the file, and to know what the earlier batches already created.
 */
function withLineNumbers(error: unknown, batch: readonly InputLine[], createdBefore: number) {
  if (!isServiceError(error)) return error;
  const entry = /^tasks\[(\d+)\]\.?/.exec(error.details);
  const line = entry ? batch[Number(entry[1])]?.line : undefined;
  const where =
    line === undefined
      ? `the batch of lines ${batch[0]?.line}–${batch[batch.length - 1]?.line}`
      : `line ${line}`;
  const detail = entry ? error.details.slice(entry[0].length) : error.details;
  const earlier = createdBefore > 0 ? `; ${createdBefore} tasks of earlier lines were created` : '';
  return Object.assign(error, { details: `${where}: ${detail}${earlier} (nothing of this batch)` });
}

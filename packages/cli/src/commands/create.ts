/**
 * `sluice create <type> --input '<json>' | --input-file <file> [--priority P0..P3]
 * [--idempotency-key <key>] [--watch]`, or `--inputs-file <file>` for one task per line
 * (create-many.ts).
 */
import { readFile } from 'node:fs/promises';
import { parsePriority } from '../arg-values.js';
import { UsageError, type Command, type CommandContext } from '../command.js';
import { priorityWord, statusWord } from '../format.js';
import { createMany } from './create-many.js';
import { followTask } from './watch.js';

/** The priority of a task created without `--priority`: ordinary background work. */
export const DEFAULT_PRIORITY = 'P2';

/**
 * The input as JSON text, exactly as given: the gateway validates it (and names the failing field),
 * so the CLI does not second-guess it. `--input-file -` reads standard input.
 */
async function readInput(context: CommandContext): Promise<string> {
  const inline = context.option('input');
  const file = context.option('input-file');
  if ((inline === undefined) === (file === undefined)) {
    throw new UsageError(
      'give the input as exactly one of --input <json>, --input-file <file> or --inputs-file <file>',
    );
  }
  return inline ?? readFileOption('input-file', file ?? '');
}

/** A file named by an option (`-`: standard input); a usage error when it cannot be read. */
async function readFileOption(option: string, file: string): Promise<string> {
  try {
    return file === '-' ? await readStream(process.stdin) : await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read --${option} ${file}: ${(error as Error).message}`);
  }
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream)
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

export const createCommand: Command = {
  name: 'create',
  args: ['type'],
  options: {
    input: { type: 'string' },
    'input-file': { type: 'string' },
    'inputs-file': { type: 'string' },
    priority: { type: 'string' },
    'idempotency-key': { type: 'string' },
    watch: { type: 'boolean' },
  },
  usage:
    "<type> (--input '<json>' | --input-file <file> | --inputs-file <file>) [--priority P0..P3] [--idempotency-key <key>] [--watch]",
  summary: 'create a task and print its id (--watch: follow it until it finishes)',
  help: [
    '--input <json>           the task input as JSON text',
    '--input-file <file>      read the input from a file (- for standard input)',
    '--inputs-file <file>     one task per line of a JSON Lines file (- for standard input),',
    '                         500 per call, each call all or none; with --idempotency-key <k>',
    '                         line n gets the key <k>:<n>, so a rerun creates nothing twice',
    `--priority P0..P3        scheduling priority (default ${DEFAULT_PRIORITY}; P0 is the most urgent)`,
    '--idempotency-key <key>  repeat-safe create: the same key and input return the first task',
    '--watch                  follow the task like `sluice watch`; the exit code is its outcome',
  ],
  async run(context) {
    const [type = ''] = context.args;
    const priority = parsePriority(context.option('priority') ?? DEFAULT_PRIORITY);
    const idempotencyKey = context.option('idempotency-key');
    // `--idempotency-key "$KEY"` with KEY unset asks for a repeat-safe create: without a key (the
    // API's empty one) a rerun would create the task again.
    if (idempotencyKey === '') throw new UsageError('--idempotency-key must not be empty');
    const inputsFile = context.option('inputs-file');
    if (inputsFile !== undefined) {
      if (context.option('input') !== undefined || context.option('input-file') !== undefined) {
        throw new UsageError(
          'give the input as exactly one of --input, --input-file or --inputs-file',
        );
      }
      if (context.flag('watch'))
        throw new UsageError('--watch follows one task: not with --inputs-file');
      const text = await readFileOption('inputs-file', inputsFile);
      return createMany(context, { type, priority, text, keyPrefix: idempotencyKey });
    }
    const input = await readInput(context);
    const response = await context
      .tasks()
      .createTask({ type, priority, input, ...(idempotencyKey ? { idempotencyKey } : {}) });
    const { task } = response;
    const id = task.task_id;
    if (context.json) {
      context.output.out(JSON.stringify(response, null, context.flag('watch') ? 0 : 2));
    } else if (response.created) {
      context.output.out(
        `created task ${id} (${task.type}, ${priorityWord(task.priority)}, ${statusWord(task.status)})`,
      );
    } else {
      context.output.out(
        `task ${id} already exists for idempotency key ${JSON.stringify(task.idempotency_key)} ` +
          `(${task.type}, ${statusWord(task.status)}); nothing was created`,
      );
    }
    if (context.flag('watch')) return followTask(context, id, 0);
    if (!context.json) context.output.err(`follow it: sluice watch ${id}`);
    return 0;
  },
};

/**
 * `sluice` — the command-line client of the Sluice gRPC API: finds the command, parses its
 * arguments, runs it with lazily created clients and turns every failure into a message and an
 * exit code (0 success, 1 refused by the server or the task failed, 2 usage, 130 Ctrl-C, 141 the
 * output's reader went away).
 *
 * @example
 * ```sh
 * export SLUICE_API_KEY=sk_...
 * sluice create research-brief --input '{"topic":"queues","sourceUrl":"https://example.com"}' --watch
 * sluice list --status running
 * ```
 */
import { parseArgs } from 'node:util';
import { status as grpcStatus } from '@grpc/grpc-js';
import {
  createAdminClient,
  createTaskClient,
  isServiceError,
  type AdminClient,
  type TaskClient,
} from '@sluice/sdk/client';
import {
  ExitCode,
  UsageError,
  type Command,
  type CommandContext,
  type OptionSpec,
  type Output,
} from './command.js';
import { createCommand } from './commands/create.js';
import { deadLetterCommands } from './commands/dlq.js';
import { getCommand } from './commands/get.js';
import { keyCommands } from './commands/keys.js';
import { lifecycleCommands } from './commands/lifecycle.js';
import { listCommand } from './commands/list.js';
import { pressureCommands } from './commands/pressure.js';
import { tenantCommands } from './commands/tenants.js';
import { watchCommand } from './commands/watch.js';
import {
  DEFAULT_ADDRESS,
  ENV_ADDRESS,
  ENV_API_KEY,
  resolveConnection,
  type ConnectionConfig,
} from './config.js';
import { renderServiceError } from './format.js';
import { printableOutput } from './printable.js';

/** Every command, in the order `sluice --help` lists them. */
export const COMMANDS: readonly Command[] = [
  createCommand,
  getCommand,
  watchCommand,
  listCommand,
  ...lifecycleCommands,
  ...tenantCommands,
  ...keyCommands,
  ...deadLetterCommands,
  ...pressureCommands,
];

/** Options every command takes. */
export const GLOBAL_OPTIONS: OptionSpec = {
  address: { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

const GLOBAL_HELP = [
  `--address <host:port>  the gateway (default $${ENV_ADDRESS}, else ${DEFAULT_ADDRESS})`,
  `--api-key <key>        the API key (default $${ENV_API_KEY}; required)`,
  '--json                 machine output: the API messages as JSON',
  '-h, --help             help (also: sluice <command> --help)',
];

/** What the CLI runs in; the defaults are the process's. */
export interface CliEnvironment {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly output: Output;
  /** Aborts long-running commands (Ctrl-C). */
  readonly signal: AbortSignal;
  /** Called when a command looks at {@link signal}, i.e. it will stop by itself when aborted. */
  readonly onSignalUsed?: () => void;
  readonly now: () => Date;
  /** Build the clients (tests may point them elsewhere). */
  readonly createTaskClient: typeof createTaskClient;
  readonly createAdminClient: typeof createAdminClient;
}

/** A command found on the command line, with its arguments parsed. */
export interface ParsedCommandLine {
  readonly command: Command;
  readonly args: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
}

/** The command line asks for help: general, about a group (`keys`) or about one command. */
export interface HelpRequest {
  readonly help: true;
  readonly command?: Command;
  /** The commands of a group, e.g. every `keys …` command. */
  readonly group?: readonly Command[];
}

/** The commands whose first word is `word` when they have two (`keys` → keys create/list/revoke). */
function groupOf(word: string | undefined, commands: readonly Command[]): Command[] {
  return word === undefined ? [] : commands.filter((c) => c.name.startsWith(`${word} `));
}

/** The option names of a spec, without dashes, as `parseArgs` reports them in its tokens. */
function optionNames(spec: OptionSpec): Set<string> {
  return new Set(Object.keys(spec));
}

/** Finds the command named by the leading positionals (one word, or a group and a word). */
function findCommand(
  positionals: readonly string[],
  commands: readonly Command[],
): { command: Command; words: number } | undefined {
  for (const words of [2, 1]) {
    const name = positionals.slice(0, words).join(' ');
    const command = commands.find((c) => c.name === name);
    if (command && positionals.length >= words) return { command, words };
  }
  return undefined;
}

/** The usage line of a command. */
export function usageOf(command: Command): string {
  return `usage: sluice ${command.name} ${command.usage}`.trimEnd();
}

/** Help of one command, or of all the given ones. */
export function helpText(commands: readonly Command[], command?: Command): string {
  if (command) {
    return [
      usageOf(command),
      '',
      command.summary,
      ...(command.help && command.help.length > 0
        ? ['', ...command.help.map((h) => `  ${h}`)]
        : []),
      '',
      'global options:',
      ...GLOBAL_HELP.map((h) => `  ${h}`),
    ].join('\n');
  }
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'usage: sluice <command> [arguments] [options]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'options:',
    ...GLOBAL_HELP.map((h) => `  ${h}`),
    '',
    'exit codes: 0 success, 1 refused by the server or the task did not succeed, 2 usage error,',
    '            130 Ctrl-C, 141 the reader of the output went away (| head)',
  ].join('\n');
}

/**
 * Refuses an option with a value given more than once: `parseArgs` keeps the last value only, so
 * `--status running --status queued` would list the queued tasks alone and of two `--input`s one
 * would be dropped without a word. (A repeated flag, such as `--json --json`, is harmless.)
 */
function refuseRepeatedValues(tokens: ReturnType<typeof parseArgs>['tokens'], command: Command) {
  const values = new Map<string, string[]>();
  for (const token of tokens ?? []) {
    if (token.kind !== 'option' || token.value === undefined) continue;
    const seen = values.get(token.name) ?? [];
    seen.push(token.value);
    values.set(token.name, seen);
    if (seen.length > 1) {
      throw new UsageError(
        `--${token.name} is given twice (${seen.map((v) => JSON.stringify(v)).join(', ')}): give it once`,
        command,
      );
    }
  }
}

/**
 * Parses a command line: first the command (its words are the first positionals, so options may
 * come before it), then its arguments, strictly against the command's options and the global ones.
 *
 * @throws UsageError for an unknown command or option, a missing value, a wrong argument count.
 */
export function parseCommandLine(
  argv: readonly string[],
  commands: readonly Command[] = COMMANDS,
): ParsedCommandLine | HelpRequest {
  // First pass, lenient, with every option any command knows: where the command words are.
  const everyOption: OptionSpec = { ...GLOBAL_OPTIONS };
  for (const command of commands) Object.assign(everyOption, command.options);
  const loose = parseArgs({
    args: [...argv],
    options: everyOption,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const known = optionNames(everyOption);
  for (const token of loose.tokens) {
    if (token.kind === 'option' && !known.has(token.name)) {
      throw new UsageError(`unknown option ${token.rawName}`);
    }
  }
  const found = findCommand(loose.positionals, commands);
  if (!found) {
    const asksHelp = loose.values['help'] === true || loose.positionals[0] === 'help';
    const words = loose.positionals.slice(loose.positionals[0] === 'help' ? 1 : 0);
    const about = findCommand(words, commands)?.command;
    const group = groupOf(words[0], commands);
    if (asksHelp) {
      if (about) return { help: true, command: about };
      return group.length > 0 ? { help: true, group } : { help: true };
    }
    if (loose.positionals.length === 0) throw new UsageError('no command given');
    if (group.length > 0) {
      throw new UsageError(
        `"${words[0]}" needs a subcommand: ${group.map((c) => c.name).join(', ')}`,
      );
    }
    throw new UsageError(`unknown command "${loose.positionals.slice(0, 2).join(' ')}"`);
  }
  const { command, words } = found;

  let strict;
  try {
    strict = parseArgs({
      args: [...argv],
      options: { ...GLOBAL_OPTIONS, ...command.options },
      strict: true,
      allowPositionals: true,
      tokens: true,
    });
  } catch (error) {
    // Node's messages name the option ("Option '--limit <value>' argument missing").
    throw new UsageError((error as Error).message, command);
  }
  if (strict.values['help'] === true) return { help: true, command };
  refuseRepeatedValues(strict.tokens, command);
  const args = strict.positionals.slice(words);
  const fits = command.variadic
    ? args.length >= command.args.length
    : args.length === command.args.length;
  if (!fits) {
    const expected = command.args.map((a) => `<${a}>`).join(' ') || 'no arguments';
    throw new UsageError(
      args.length < command.args.length
        ? `missing ${command.args
            .slice(args.length)
            .map((a) => `<${a}>`)
            .join(' ')}`
        : `too many arguments: expected ${expected}, got "${args.join(' ')}"`,
      command,
    );
  }
  return { command, args, values: strict.values as ParsedCommandLine['values'] };
}

/** The process's environment: real streams, SIGINT aborting, the system clock. */
function processEnvironment(signal: AbortSignal): CliEnvironment {
  return {
    env: process.env,
    output: {
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
    },
    signal,
    now: () => new Date(),
    createTaskClient,
    createAdminClient,
  };
}

/**
 * Ends the process quietly when the reader of its output went away (`sluice watch … | head -1`):
 * the next write fails with EPIPE, which, unhandled, ended the process with a stack trace. Node
 * ignores SIGPIPE, so the exit code is the one a shell reports for a tool that signal ended.
 */
export function exitQuietlyOnClosedOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(ExitCode.BrokenPipe);
      throw error;
    });
  }
}

/** Runs a parsed command; owns the clients it creates and closes them. */
async function runCommand(parsed: ParsedCommandLine, environment: CliEnvironment): Promise<number> {
  const { values } = parsed;
  const str = (name: string) => (typeof values[name] === 'string' ? values[name] : undefined);
  let connection: ConnectionConfig | undefined;
  const connect = () =>
    (connection ??= resolveConnection(
      { address: str('address'), apiKey: str('api-key') },
      environment.env,
    ));
  let taskClient: TaskClient | undefined;
  let adminClient: AdminClient | undefined;
  const context: CommandContext = {
    args: parsed.args,
    option: str,
    flag: (name) => values[name] === true,
    json: values['json'] === true,
    output: environment.output,
    get signal() {
      environment.onSignalUsed?.();
      return environment.signal;
    },
    now: environment.now,
    tasks: () => (taskClient ??= environment.createTaskClient(connect())),
    admin: () => (adminClient ??= environment.createAdminClient(connect())),
  };
  try {
    return await parsed.command.run(context);
  } catch (error) {
    if (!isServiceError(error)) throw error;
    environment.output.err(renderServiceError(error.code, error.details));
    if (error.code === grpcStatus.UNAVAILABLE && connection) {
      environment.output.err(
        `is the gateway running at ${connection.address}? (set --address or ${ENV_ADDRESS})`,
      );
    }
    // A gateway that takes the connection but never answers (hung, or not a gRPC server) ends in
    // the call's deadline, which grpc-js words as "Waiting for LB pick".
    if (error.code === grpcStatus.DEADLINE_EXCEEDED && connection) {
      environment.output.err(
        `the gateway at ${connection.address} did not answer in time: is it the gateway, and ` +
          `is it up? (set --address or ${ENV_ADDRESS})`,
      );
    }
    return ExitCode.Failed;
  } finally {
    taskClient?.close();
    adminClient?.close();
  }
}

/**
 * Runs the `sluice` command line `argv` (without `node` and the script) and resolves with the exit
 * code. Never rejects: every failure is printed to the error output.
 */
export async function runCli(
  argv: readonly string[],
  overrides: Partial<CliEnvironment> = {},
): Promise<number> {
  // Ctrl-C: a command that follows the signal (watch) stops and reports; any other (one request)
  // is simply ended, as without a handler, instead of waiting for its call's deadline.
  const interrupt = new AbortController();
  let signalUsed = false;
  const onSigint = () => {
    if (!signalUsed) process.exit(ExitCode.Interrupted);
    interrupt.abort();
  };
  if (overrides.signal === undefined) process.once('SIGINT', onSigint);
  const given: CliEnvironment = {
    ...processEnvironment(interrupt.signal),
    onSignalUsed: () => (signalUsed = true),
    ...overrides,
  };
  const environment: CliEnvironment = { ...given, output: printableOutput(given.output) };
  const { output } = environment;
  let command: Command | undefined;
  try {
    const parsed = parseCommandLine(argv);
    if ('help' in parsed) {
      output.out(helpText(parsed.group ?? COMMANDS, parsed.command));
      return ExitCode.Ok;
    }
    command = parsed.command;
    return await runCommand(parsed, environment);
  } catch (error) {
    if (error instanceof UsageError) {
      const about = error.command ?? command;
      output.err(`error: ${error.message}`);
      output.err(
        about
          ? `${usageOf(about)}  (sluice ${about.name} --help for more)`
          : 'run sluice --help for the commands',
      );
      return ExitCode.Usage;
    }
    output.err(`error: ${error instanceof Error ? error.message : String(error)}`);
    return ExitCode.Failed;
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}

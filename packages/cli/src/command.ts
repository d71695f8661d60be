/**
 * The shape of a `sluice` command and what it gets to run: its parsed arguments, where to write,
 * and the API clients (created on first use, so a usage error never needs a key).
 */
import type { ParseArgsConfig } from 'node:util';
import type { AdminClient, TaskClient } from '@sluice/sdk/client';

/** `parseArgs` option declarations of one command. */
export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

/** Exit codes: 0 success, 1 the server refused or the task failed, 2 the command line is wrong. */
export const ExitCode = {
  Ok: 0,
  Failed: 1,
  Usage: 2,
  /** Ctrl-C (128 + SIGINT), as shells report it. */
  Interrupted: 130,
  /** The reader of the output went away (`sluice … | head -1`): 128 + SIGPIPE, as shells say. */
  BrokenPipe: 141,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A mistake on the command line (or in its environment): exit code 2, with the usage. */
export class UsageError extends Error {
  override readonly name = 'UsageError';

  /** @param command the command whose usage to show, when known */
  constructor(
    message: string,
    readonly command?: Command,
  ) {
    super(message);
  }
}

/** Where output goes: whole lines, without their newline. */
export interface Output {
  /** Results (what a script would read). */
  out(line: string): void;
  /** Errors and hints for people. */
  err(line: string): void;
}

/** Everything a command's `run` may use. */
export interface CommandContext {
  /** The positional arguments after the command's name, as many as {@link Command.args}. */
  readonly args: readonly string[];
  /** The value of a string option, `undefined` when absent. */
  option(name: string): string | undefined;
  /** Whether a boolean option was given. */
  flag(name: string): boolean;
  /** `--json`: machine output (the API's messages as JSON) instead of text for people. */
  readonly json: boolean;
  readonly output: Output;
  /** Aborted on Ctrl-C; long-running commands (watch) stop and exit with 130. */
  readonly signal: AbortSignal;
  /** The clock, for "in 3m" and "took 12s". */
  now(): Date;
  /** The TaskService client (needs the API key; throws {@link UsageError} without one). */
  tasks(): TaskClient;
  /** The AdminService client (needs an admin key; throws {@link UsageError} without a key). */
  admin(): AdminClient;
}

/** One command, e.g. `get` or `tenants create`. */
export interface Command {
  /** One or two words: `get`, `keys revoke`. */
  readonly name: string;
  /** Names of the positional arguments, all required, e.g. `['id']`. */
  readonly args: readonly string[];
  /** The last argument takes one or more values (`<id…>`); `run` gets them all in `args`. */
  readonly variadic?: boolean;
  /** Its own options (the global ones — address, API key, JSON, help — are added). */
  readonly options: OptionSpec;
  /** The argument part of the synopsis, e.g. `<id> [--reason <text>]`. */
  readonly usage: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Lines explaining the options, for `sluice <command> --help`. */
  readonly help?: readonly string[];
  /** Runs the command; resolves with the exit code. Rejections are reported by `main`. */
  run(context: CommandContext): Promise<number>;
}

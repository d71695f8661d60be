/**
 * The command line of `npm start` and `npm run demo`: parsed with node:util's parseArgs, and an
 * argument they do not take reported in one line with how to call them, exit status 2 (a usage
 * error), instead of the parser's TypeError with its stack trace.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The exit status of a usage error, as the sluice CLI has it. */
export const EXIT_USAGE = 2;

/**
 * `parseArgs(config)` of this process's arguments; on a wrong one, prints the parser's message
 * and `usage: <usage>` to stderr and exits with {@link EXIT_USAGE}.
 */
export function parseCommandLine<T extends ParseArgsConfig>(
  config: T,
  usage: string,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    if (!isParseArgsError(error)) throw error;
    console.error(`${error.message}\nusage: ${usage}`);
    process.exit(EXIT_USAGE);
  }
}

function isParseArgsError(error: unknown): error is Error {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

/**
 * Console output of the infrastructure scripts: one short line per step, and a failure type whose
 * message is meant for the person at the terminal (printed without a stack trace).
 */

/**
 * Prints one progress line, prefixed so it stands out among the output of the tools we run. It goes
 * to stderr so that a wrapped command's stdout (a new API key, say) stays clean for pipes.
 */
export function step(message) {
  process.stderr.write(`[sluice] ${message}\n`);
}

/** A failure the user can act on; the entry scripts print its message alone and exit non-zero. */
export class PrepareError extends Error {
  name = 'PrepareError';
}

/** Prints an error: a `PrepareError` as its message, anything else with its stack. */
export function reportError(error) {
  if (error instanceof PrepareError) {
    process.stderr.write(`[sluice] error: ${error.message}\n`);
  } else {
    process.stderr.write(`[sluice] unexpected error: ${error?.stack ?? String(error)}\n`);
  }
}

/**
 * The errors behind an error: drizzle wraps the driver's error in its own (as `cause`), so what
 * Postgres or the socket said is one or more levels down.
 */

/** Causes followed at most. */
const MAX_DEPTH = 5;

/** `error` and its causes, outermost first, as far as they are `Error`s (at most five). */
export function errorChain(error: unknown): Error[] {
  const chain: Error[] = [];
  for (let current = error; chain.length < MAX_DEPTH && current instanceof Error;) {
    chain.push(current);
    current = current.cause;
  }
  return chain;
}

/** The `code` of an error in the chain (a SQLSTATE, or a driver or socket code), if any. */
export function codeOf(error: Error): string | undefined {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** Types of listener.mjs, for the TypeScript tests that use it. */

/** A process listening on a port. */
export interface Listener {
  readonly pid: number;
  /** Its command line. */
  readonly argv: readonly string[];
}

export function listenerOf(port: number): Listener | undefined;

export function isRunning(listener: Listener): boolean;

export function logFileOf(argv: readonly string[]): string | undefined;

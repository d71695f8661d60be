/**
 * Telling a deadlock (SQLSTATE 40P01) apart: Postgres broke a wait cycle by failing this statement,
 * which changed nothing and may simply be run again.
 */

/** Causes followed at most (drizzle wraps the driver's error in its own). */
const MAX_DEPTH = 5;

/** Whether `error` (or a cause) is Postgres reporting a deadlock it broke by failing us. */
export function isDeadlock(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_DEPTH && current instanceof Error; depth++) {
    if ((current as { code?: unknown }).code === '40P01') return true;
    current = current.cause;
  }
  return false;
}

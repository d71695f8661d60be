/**
 * Telling a deadlock (SQLSTATE 40P01) apart: Postgres broke a wait cycle by failing this statement,
 * which changed nothing and may simply be run again.
 */
import { codeOf, errorChain } from './error-chain.js';

/** Whether `error` (or a cause) is Postgres reporting a deadlock it broke by failing us. */
export function isDeadlock(error: unknown): boolean {
  return errorChain(error).some((e) => codeOf(e) === '40P01');
}

/**
 * Telling "Postgres refused what a statement wrote" apart: the server failed the statement for its
 * data (SQLSTATE class 22: a value it cannot store, out of range, too long), a constraint (23) or
 * a size limit (54). Its transaction wrote nothing, and the same rows written apart may all
 * succeed but the offending one. Not a refusal in this sense: an unavailable database (nothing
 * would succeed) or a transaction rolled back to be run again as it is (class 40: a deadlock, a
 * serialization failure). And telling Sluice's own refusals (`sluice_refuse_commit`) apart.
 */
import { codeOf, errorChain } from './error-chain.js';

/**
 * The SQLSTATE of `sluice_refuse_commit` (migration 0010): a statement Sluice fails on purpose so
 * that its transaction, or its own write, commits nothing.
 */
const REFUSED_ON_PURPOSE = 'SLR01';

/** Whether `error` (or a cause) is a `sluice_refuse_commit` refusal. */
export function isRefusedOnPurpose(error: unknown): boolean {
  return errorChain(error).some((current) => codeOf(current) === REFUSED_ON_PURPOSE);
}

/** SQLSTATE classes of a statement refused for what it writes. */
const REFUSED_CLASSES = new Set(['22', '23', '54']);

/** Whether `error` (or a cause) is Postgres refusing a statement for the data it writes. */
export function isWriteRefused(error: unknown): boolean {
  return errorChain(error).some((current) => {
    const code = codeOf(current);
    return (
      code !== undefined && /^[0-9A-Z]{5}$/.test(code) && REFUSED_CLASSES.has(code.slice(0, 2))
    );
  });
}

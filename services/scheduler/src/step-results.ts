/**
 * What a `step.result` message (an executor recorded a step's outcome) asks of the scheduler.
 *
 * A recorded outcome waits for the outcome pass; one whose write applied it too (a usual outcome,
 * `recordStepOutcomes`) leaves the pass nothing to do, so it does not wake it (an empty pass still
 * costs a transaction), and its attempt is counted in the resource's retry budget here, since no
 * pass of this replica will count it. Either way the step left the in-flight count, so its slot is
 * free (freed-slots.ts).
 *
 * The scheduler replicas share the result subject as one queue group: each result reaches one of
 * them, so each counts about its share of the attempts applied by executors, as each applies about
 * its share of the other outcomes (retry-budget-ledger.ts), and one pass, not one per replica,
 * answers it.
 */
import { decodeMessageOf } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';

/** The queue group the scheduler replicas subscribe to the result subject in. */
export const STEP_RESULT_QUEUE = 'scheduler';

/**
 * Reads a `step.result` message: the resource of an outcome the executor's write applied (its
 * attempt to count in the retry budget; nothing for the outcome pass), else undefined (the pass
 * applies it). A malformed one is logged and read as an outcome to apply, so the pass looks: no
 * wake-up is lost to a bad payload.
 */
export function appliedResourceOf(
  subject: string,
  data: Uint8Array,
  log: Logger,
): string | undefined {
  try {
    return decodeMessageOf('step.result', subject, data).applied?.resource;
  } catch (error) {
    log.warn({ err: error, subject }, 'malformed step result; the outcome pass looks anyway');
    return undefined;
  }
}

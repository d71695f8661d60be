/**
 * Repair of a step whose result failed validation (ARCHITECTURE.md, errors and retries): a
 * `schema_validation` failure is never retried as is — the same input gives the same bad result —
 * but a step may name a repair step (e.g. an LLM step that fixes its own output). The scheduler then
 * runs the repair step next, in the failed step's place: its input says what failed, and its result
 * continues the task as the failed step's would have (`next`, `fanOut`, `complete`, an approval).
 *
 * Repairs are bounded per task and failing step: at most the failing step's `maxAttempts`, so a
 * repair step that keeps handing back to a step that keeps failing ends in `failed_terminal`.
 */
import type { SerializedStepError } from './errors.js';
import type { Json } from './step-outcome.js';

/** What {@link decideRepair} looks at. */
export interface RepairQuestion {
  readonly error: SerializedStepError;
  /** The repair step the failed step declares, if any. */
  readonly repairStep: string | undefined;
  /** Repairs of this step already started in this task. */
  readonly repairsSoFar: number;
  /** Most repairs of this step per task (its `maxAttempts`). */
  readonly maxRepairs: number;
}

/** What {@link decideRepair} answers. */
export type RepairDecision =
  | { readonly repair: true; readonly step: string }
  | {
      readonly repair: false;
      readonly reason: 'not_schema_validation' | 'no_repair_step' | 'repairs_exhausted';
    };

/** Whether a failed step goes to its repair step. */
export function decideRepair(question: RepairQuestion): RepairDecision {
  if (question.error.errorClass !== 'schema_validation') {
    return { repair: false, reason: 'not_schema_validation' };
  }
  if (question.repairStep === undefined) return { repair: false, reason: 'no_repair_step' };
  if (question.repairsSoFar >= question.maxRepairs) {
    return { repair: false, reason: 'repairs_exhausted' };
  }
  return { repair: true, step: question.repairStep };
}

/**
 * The input a repair step receives. `repairOf` names the failed step (and marks the step row as a
 * repair, which is how repairs are counted); `input` is the failed step's input, `result` what its
 * handler returned (`null` when it returned nothing recordable, e.g. its own input was invalid), and
 * `error` the validation message.
 */
export interface RepairInput {
  readonly repairOf: string;
  readonly input: Json;
  readonly result: Json;
  readonly error: string;
}

/** The repair step's input, as JSON. */
export function repairInputOf(input: RepairInput): { [key: string]: Json } {
  return {
    repairOf: input.repairOf,
    input: input.input,
    result: input.result,
    error: input.error,
  };
}

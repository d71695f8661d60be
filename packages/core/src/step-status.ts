/**
 * States of one step row. The rows in `ready` whose due time has come are the ready queue.
 *
 * ready → dispatched (scheduler published it) → running (an executor started it)
 *       → succeeded | failed | cancelled (the executor recorded the outcome)
 */
export const StepStatus = {
  Ready: 'ready',
  Dispatched: 'dispatched',
  Running: 'running',
  Succeeded: 'succeeded',
  Failed: 'failed',
  Cancelled: 'cancelled',
} as const;
export type StepStatus = (typeof StepStatus)[keyof typeof StepStatus];

export const STEP_STATUSES: readonly StepStatus[] = Object.values(StepStatus);

/** Steps an executor may still be working on (or about to). */
export const IN_FLIGHT_STEP_STATUSES: readonly StepStatus[] = ['dispatched', 'running'];

/** Type guard for untrusted strings. */
export function isStepStatus(value: unknown): value is StepStatus {
  return typeof value === 'string' && (STEP_STATUSES as readonly string[]).includes(value);
}

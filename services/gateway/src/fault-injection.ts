/**
 * Faults the gateway injects into itself for crash tests only (`SLUICE_FAULT_INJECTION`, see
 * docs/operations.md). Never set in production: the one fault there is kills the process.
 *
 * - `crash_after_create_commit`: the process kills itself (SIGKILL, no cleanup) right after a
 *   CreateTask transaction has committed and before the answer is sent — the window in which a
 *   client cannot know whether its task exists, which idempotency keys exist for.
 */
import { z } from 'zod';

/** The faults there are. */
export const FAULTS = ['crash_after_create_commit'] as const;

export type Fault = (typeof FAULTS)[number];

/** `SLUICE_FAULT_INJECTION`: unset (no fault) or one of {@link FAULTS}; anything else is refused. */
export const faultInjectionVar = () =>
  z.enum(FAULTS, { message: `must be one of ${FAULTS.join(', ')} (test only)` }).optional();

/** What kills the process; a test of this module passes its own. */
export type Crash = () => void;

const sigkillSelf: Crash = () => {
  // SIGKILL, not exit(): no handler, no flush, no graceful close — as when the machine dies.
  process.kill(process.pid, 'SIGKILL');
};

/** The hooks the gateway calls at its fault points; each does nothing unless its fault is set. */
export interface FaultInjection {
  /** Called once a CreateTask transaction has committed, before the answer. */
  afterCreateCommit(): void;
}

export function createFaultInjection(
  fault: Fault | undefined,
  crash: Crash = sigkillSelf,
): FaultInjection {
  return {
    afterCreateCommit: () => {
      if (fault === 'crash_after_create_commit') crash();
    },
  };
}

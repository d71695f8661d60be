/**
 * Which resources the dispatcher's last admission pass found full: due ready steps and no room
 * under the limit (the urgent reserve counted as full unless a P0 step is ready; see
 * `lockAdmission`). A created task whose first step goes to such a resource, and is not P0, cannot
 * be admitted before a slot there frees — and whatever frees one wakes the dispatcher anyway (a
 * finished step's result message, a lost step put back by the reconciler, the governor's decision)
 * or the poll finds it (a limit changed through the admin API). So the created task's own wake-up
 * need not start a pass: under a backlog that saves one pass per created task (a transaction and
 * the admission-lock statement that finds nothing to admit).
 *
 * A P0 step always wakes the dispatcher: the reserve is kept for it, so "full" may not be full for
 * it. A wake-up that names no step (an older gateway) always does too.
 */
import { decodeMessageOf } from '@sluice/bus';
import type { Priority } from '@sluice/core';
import type { Logger } from '@sluice/telemetry';

/** The ready step a wake-up is about. */
export interface ReadyStepNotice {
  readonly resource: string;
  readonly priority: Priority;
  /** Dispatched already, by the gateway's urgent claim: nothing for admission to do. */
  readonly dispatched?: true;
}

export class FullResources {
  #full: ReadonlySet<string> = new Set();

  /** Records what the latest admission pass saw (it replaces what earlier passes saw). */
  seen(full: readonly string[]): void {
    this.#full = new Set(full);
  }

  /** Whether a pass started for this new ready step would admit nothing (see the module doc). */
  admitsNothingFor(step: ReadyStepNotice): boolean {
    return step.priority !== 0 && this.#full.has(step.resource);
  }
}

/**
 * The ready step a `wake.dispatch` message names, if any. A malformed message is logged and read
 * as naming none, so the dispatcher looks: no wake-up is lost to a bad payload.
 */
export function readyStepOf(
  subject: string,
  data: Uint8Array,
  log: Logger,
): ReadyStepNotice | undefined {
  try {
    return decodeMessageOf('wake', subject, data).step;
  } catch (error) {
    log.warn({ err: error, subject }, 'malformed wake-up; the dispatcher looks anyway');
    return undefined;
  }
}

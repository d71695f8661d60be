/**
 * Whether a freed slot (a step's result: it left the in-flight count) should start an admission
 * pass. Only when the last pass left due ready steps waiting — for a slot of a full resource, or
 * held back by the room, a tenant's cap, a reserve or the batch size (`AdmissionClaim.leftBehind`).
 * Otherwise the pass would admit nothing: every new ready step wakes the dispatcher by itself (a
 * created task, the next step of a chain, a fired timer, a step the reconciler put back, the
 * governor's decision). At a steady arrival rate that skips one empty pass per finished step — a
 * transaction with the lock statement and the claim, about as much Postgres time as a claim that
 * takes one step.
 *
 * A result that arrives while a pass runs is judged by that pass's outcome, not the one before:
 * its slot may have freed after the pass counted, so if the pass left steps behind it goes again.
 */

/** What an admission pass saw, as far as freed slots are concerned. */
export interface AdmissionPassOutcome {
  /** Resources with due ready steps and no slot (`AdmissionClaim.full`). */
  readonly full: readonly string[];
  /** Due ready steps stayed behind in the resources it could claim in. */
  readonly leftBehind: boolean;
}

export class FreedSlots {
  /** Before the first pass nothing is known: a freed slot wakes the dispatcher. */
  #stepsWaiting = true;
  #passRunning = false;
  #freedDuringPass = false;

  /** The dispatcher begins a pass. */
  passStarted(): void {
    this.#passRunning = true;
    this.#freedDuringPass = false;
  }

  /**
   * The pass ended (`undefined`: it failed, so nothing is known). Returns whether to run another at
   * once: a slot freed during this pass, which left steps waiting.
   */
  passEnded(outcome: AdmissionPassOutcome | undefined): boolean {
    this.#passRunning = false;
    this.#stepsWaiting = outcome === undefined || outcome.leftBehind || outcome.full.length > 0;
    return this.#freedDuringPass && this.#stepsWaiting;
  }

  /** A step left the in-flight count; returns whether to wake the dispatcher now. */
  slotFreed(): boolean {
    if (this.#passRunning) {
      this.#freedDuringPass = true;
      return false;
    }
    return this.#stepsWaiting;
  }
}

/**
 * The executor's local slots: it pulls a step only when one is free. A share of them (the urgent
 * reserve, see `urgentReserveSlots`) stays free for P0: a lower-priority step takes a slot only
 * while more than the reserve is free, so interactive work starts at once while batch work keeps
 * the rest busy. The scheduler's admission keeps the same reserve of each resource's limit.
 */
export class Slots {
  private used = 0;

  /**
   * @param capacity steps this executor runs at once.
   * @param reservedForUrgent of those, how many stay free for P0 steps (less than `capacity`).
   */
  constructor(
    readonly capacity: number,
    readonly reservedForUrgent = 0,
  ) {
    if (!(reservedForUrgent >= 0 && reservedForUrgent < capacity)) {
      throw new RangeError(`the urgent reserve (${reservedForUrgent}) must be below ${capacity}`);
    }
  }

  get inUse(): number {
    return this.used;
  }

  get free(): number {
    return this.capacity - this.used;
  }

  /** Whether a step (P0: `urgent`) could take a slot now. */
  canTake(urgent: boolean): boolean {
    return this.used < this.capacity - (urgent ? 0 : this.reservedForUrgent);
  }

  /** Takes a slot if one is open to a step of this urgency; false when none is. */
  tryTake(urgent: boolean): boolean {
    if (!this.canTake(urgent)) return false;
    this.used += 1;
    return true;
  }

  /** Gives a slot back. */
  release(): void {
    if (this.used === 0) throw new Error('released a slot that was not taken');
    this.used -= 1;
  }
}

/**
 * A counting semaphore of the executor's local slots: it pulls a step only when one is free.
 */
export class Slots {
  private used = 0;
  private waiters: Array<() => void> = [];

  constructor(readonly capacity: number) {}

  get inUse(): number {
    return this.used;
  }

  get free(): number {
    return this.capacity - this.used;
  }

  /** Takes a slot, waiting until one is free. */
  async acquire(): Promise<void> {
    if (this.used < this.capacity) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Gives a slot back (to the longest waiter, if any). */
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.used--;
  }
}

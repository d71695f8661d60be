/**
 * Small timing helpers for service loops.
 */

/**
 * A wake-able pause: `wait(ms)` resolves after `ms` or as soon as `wake()` is called, whichever
 * comes first. Loops use it to sleep between polls while reacting at once to wake-up messages.
 */
export class Waker {
  private pending: (() => void) | undefined;
  private woken = false;

  /** Ends the current (or the next) wait now. */
  wake(): void {
    this.woken = true;
    const resolve = this.pending;
    this.pending = undefined;
    resolve?.();
  }

  /** Whether a wake-up came since the last wait ended: the next wait then returns at once. */
  get hasWakeUp(): boolean {
    return this.woken;
  }

  /**
   * Waits up to `ms`, or until woken (a wake that came before the wait counts); resolves true when
   * woken, false when the time ran out.
   */
  wait(ms: number): Promise<boolean> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        resolve(false);
      }, ms);
      this.pending = () => {
        clearTimeout(timer);
        this.woken = false;
        resolve(true);
      };
    });
  }
}

/** Resolves when `promise` does, or rejects after `ms` with `message`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Riding out a Postgres outage with a step message in hand.
 *
 * A step that cannot be started or recorded because Postgres is unreachable used to be handed back
 * (`nak`) at once; JetStream counts every such delivery, so an outage longer than a few ack waits
 * pushed healthy steps past `max_deliver` into the dead letters. Instead the executor keeps the
 * message (and its slot, which also stops it pulling more) and tries again with a growing pause,
 * telling JetStream it is still working, until Postgres answers or a bound passes.
 */
import { isDatabaseUnavailable } from '@sluice/db';

/** Options of {@link retryWhileDatabaseDown}. */
export interface DatabaseOutageOptions {
  /**
   * Called before each pause and, while an attempt is on its way, every {@link maxPauseMs}: e.g.
   * `message.working()`, so the message is not redelivered.
   */
  readonly keepAlive: () => void;
  /** True once the executor is stopping: give up at once. */
  readonly stopping: () => boolean;
  /** Longest time to keep trying; then the last error is thrown (default 60 s). */
  readonly maxWaitMs?: number;
  /** First pause (default 250 ms), doubled up to {@link maxPauseMs}. */
  readonly firstPauseMs?: number;
  /** Longest pause; keep it well under the ack wait (default 1 000 ms). */
  readonly maxPauseMs?: number;
  /** Each failed attempt that will be retried. */
  readonly onRetry?: (error: unknown, attempt: number) => void;
}

/**
 * Runs `attempt`; while it fails because the database is unavailable, runs it again after a
 * pause. Any other error, and the last one once the bound passed, is thrown.
 *
 * An attempt is waited for as long as it takes (see the note on {@link keptAliveWhile}), the
 * message kept alive meanwhile.
 */
export async function retryWhileDatabaseDown<T>(
  attempt: () => Promise<T>,
  options: DatabaseOutageOptions,
): Promise<T> {
  const deadline = Date.now() + (options.maxWaitMs ?? 60_000);
  const maxPauseMs = options.maxPauseMs ?? 1_000;
  let pauseMs = options.firstPauseMs ?? 250;
  for (let tries = 1; ; tries++) {
    try {
      return await keptAliveWhile(attempt(), options.keepAlive, maxPauseMs);
    } catch (error) {
      const giveUp = !isDatabaseUnavailable(error) || options.stopping();
      if (giveUp || Date.now() + pauseMs > deadline) throw error;
      options.onRetry?.(error, tries);
      options.keepAlive();
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      pauseMs = Math.min(maxPauseMs, pauseMs * 2);
    }
  }
}

/**
 * `pending`, with `keepAlive` called every `everyMs` until it settles. An attempt slower than the
 * ack wait (a lock wait, a connection that went silent) otherwise had its message redelivered;
 * each redelivery found the step running under its dispatch ('busy') and was handed back,
 * spending a delivery of the step's `max_deliver` while nothing was wrong with it.
 *
 * Why no bound on the attempt itself: one given up on may still commit, and the next attempt
 * would queue behind it anyway (the executor's writes go one at a time, the outcome's on one kept
 * connection); only closing its connection would free them, which belongs to the driver.
 */
async function keptAliveWhile<T>(
  pending: Promise<T>,
  keepAlive: () => void,
  everyMs: number,
): Promise<T> {
  const timer = setInterval(keepAlive, everyMs);
  try {
    return await pending;
  } finally {
    clearInterval(timer);
  }
}

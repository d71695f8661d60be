/**
 * `ctx.progress(fraction, message)` of one step attempt: a handler may report progress in a tight
 * loop, but each report is a Postgres transaction and an event every watcher receives, so writes
 * are throttled to one per interval. Reports in between are coalesced: only the latest is written,
 * when the interval has passed — and at the latest when the step ends, so the last value reported
 * is always stored before the step's outcome.
 */
import { storableText } from '@sluice/core';
import type { Logger } from '@sluice/telemetry';

/** At most two progress writes per second per step. */
export const PROGRESS_INTERVAL_MS = 500;

/** Longest progress message kept, in characters (longer ones are cut). */
export const MAX_PROGRESS_MESSAGE_CHARS = 500;

/** One progress value. */
export interface ProgressValue {
  readonly fraction: number;
  readonly message: string;
}

/** Options of {@link createProgressReporter}. */
export interface ProgressReporterOptions {
  /** Stores a value (a transaction with its event). A rejection is logged, never thrown. */
  readonly write: (value: ProgressValue) => Promise<unknown>;
  readonly log: Pick<Logger, 'warn' | 'debug'>;
  /** Least time between the starts of two writes (default {@link PROGRESS_INTERVAL_MS}). */
  readonly intervalMs?: number;
  readonly now?: () => number;
}

/** The progress of one step attempt. */
export interface ProgressReporter {
  /**
   * Reports a value. Resolves once it, or a later value, is written (or its write failed, which is
   * logged). After {@link ProgressReporter.close} it resolves at once and writes nothing.
   *
   * @throws RangeError when `fraction` is not a number from 0 to 1.
   */
  report(fraction: number, message?: string): Promise<void>;
  /** Writes the pending value now, if any, and stops accepting reports. Never rejects. */
  close(): Promise<void>;
}

interface Waiter {
  readonly generation: number;
  readonly resolve: () => void;
}

/** Creates the reporter of one step attempt. */
export function createProgressReporter(options: ProgressReporterOptions): ProgressReporter {
  const intervalMs = options.intervalMs ?? PROGRESS_INTERVAL_MS;
  const now = options.now ?? Date.now;
  let pending: (ProgressValue & { generation: number }) | undefined;
  let generation = 0;
  let lastWriteAt = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const waiters: Waiter[] = [];

  const settle = (upTo: number) => {
    for (let i = waiters.length - 1; i >= 0; i -= 1) {
      const waiter = waiters[i];
      if (waiter && waiter.generation <= upTo) {
        waiters.splice(i, 1);
        waiter.resolve();
      }
    }
  };

  /** Writes the pending value (one write at a time), then looks whether another is due. */
  const flush = (): Promise<void> => {
    if (inFlight) return inFlight;
    const value = pending;
    if (!value) return Promise.resolve();
    pending = undefined;
    lastWriteAt = now();
    inFlight = options
      .write({ fraction: value.fraction, message: value.message })
      .then(
        () => undefined,
        (error: unknown) => options.log.warn({ err: error }, 'could not record step progress'),
      )
      .finally(() => {
        inFlight = undefined;
        settle(value.generation);
        if (!closed) schedule();
      });
    return inFlight;
  };

  const schedule = () => {
    if (!pending || inFlight || timer) return;
    const wait = lastWriteAt + intervalMs - now();
    if (wait <= 0) {
      void flush();
      return;
    }
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, wait);
  };

  return {
    report(fraction, message = '') {
      if (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1)) {
        throw new RangeError(`progress must be a number from 0 to 1, got ${String(fraction)}`);
      }
      if (closed) {
        options.log.debug({ fraction }, 'progress reported after the step ended; ignored');
        return Promise.resolve();
      }
      generation += 1;
      pending = {
        fraction,
        message: storableText(String(message).slice(0, MAX_PROGRESS_MESSAGE_CHARS)),
        generation,
      };
      const done = new Promise<void>((resolve) => waiters.push({ generation, resolve }));
      schedule();
      return done;
    },
    async close() {
      if (closed) return;
      closed = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
      // The write in flight, then the latest value, whatever the interval says.
      await inFlight;
      await flush();
      settle(generation);
    },
  };
}

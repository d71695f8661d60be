/**
 * How long a step's handler may go on after its signal aborts (its timeout or a cancel). Aborting
 * is cooperative: a handler that does not watch its signal (a loop, a call without the signal, a
 * promise that never settles) would hold its executor slot, and keep its step running and
 * heart-beating, for ever. After the grace the runner stops waiting for it and records the
 * timeout or the cancel; what the handler still does is discarded (it cannot be stopped from
 * outside in the same process), and its slot stays taken until it returns, so the resource's
 * concurrency limit still counts the work it may be doing.
 */

/** The grace the executor gives a handler after its signal aborts. */
export const ABORT_GRACE_MS = 5_000;

/** Thrown in place of a handler's result when it did not stop within its grace. */
export class AbortIgnoredError extends Error {
  override readonly name = 'AbortIgnoredError';
}

/** A promise that rejects `graceMs` after `signal` aborts, until `stop` is called. */
export interface AbortGrace {
  /** Never resolves; rejects with {@link AbortIgnoredError} once the grace is over. */
  readonly expired: Promise<never>;
  stop(): void;
}

/** Starts watching `signal`; `what` names the abort in the error (`timeout`, `cancel`). */
export function abortGrace(signal: AbortSignal, graceMs: number, what: () => string): AbortGrace {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const expired = new Promise<never>((_, reject) => {
    onAbort = () => {
      timer = setTimeout(() => {
        reject(
          new AbortIgnoredError(
            `the step did not stop within ${graceMs} ms of its ${what()}; its handler's result is discarded`,
          ),
        );
      }, graceMs);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  // Rejected only while someone races it; never an unhandled rejection after `stop`.
  expired.catch(() => {});
  return {
    expired,
    stop() {
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    },
  };
}

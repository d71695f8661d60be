/**
 * The shape of every scheduler loop: do a batch; if it was full, go again at once (throughput grows
 * with load); otherwise sleep until woken or the poll interval passes (latency stays low). Errors
 * are logged and retried after a pause, never fatal.
 *
 * While its passes find nothing to do (`idle`), a loop looks less and less often — twice the poll
 * interval, then four times, up to `idlePollMs` — since its work comes with a wake-up and the poll
 * only catches one that was lost; but never past the moment work it knows of falls due
 * (`dueInMs`: a retry's backoff, a timer; or a time it was told with `wakeIn`). A pass that finds
 * work, or one woken while it ran, brings it back to the poll interval; a wake-up itself always
 * runs a pass at once. An idle stack so runs a statement every few seconds, not several a second.
 */
import { setTimeout } from 'node:timers/promises';
import { Waker } from '@sluice/runtime';
import type { Logger } from '@sluice/telemetry';

/** A running loop. */
export interface BatchLoop {
  /** Runs the next batch now (a wake-up message arrived). */
  wake(): void;
  /**
   * Runs a batch in `ms` at the latest: work this process just wrote falls due then (a fan-out
   * branch's retry after its backoff), which no wake-up message will announce. The earliest of
   * several such times counts.
   */
  wakeIn(ms: number): void;
  /** Stops after the current batch. */
  stop(): Promise<void>;
}

/** Options of {@link startBatchLoop}. */
export interface BatchLoopOptions {
  readonly name: string;
  readonly pollMs: number;
  /**
   * The longest pause while passes report `idle` (default `pollMs`: always the poll interval). A
   * lost wake-up is seen at most this late while the loop had nothing to do.
   */
  readonly idlePollMs?: number;
  readonly log: Logger;
  /**
   * Does one batch; returns true when there may be more work right away, or a {@link BatchReport}
   * (which also says how much the batch handled, for the gather, and whether it was idle).
   */
  readonly runBatch: (pass: BatchPass) => Promise<boolean | BatchReport>;
  /**
   * How long to let work gather before the next batch while the loop is busy (0: never), so that
   * a stream of small commits (the event relay's wake-ups) makes one batch and one commit per
   * interval instead of one per wake-up. Busy means work arrived while the last batch ran and that
   * batch handled more than one item (or did not say how many). One item per batch is a quiet
   * system's pace — the events of a task on an idle system come a few milliseconds apart — where
   * a gather would only make each of them later.
   */
  readonly gatherMs?: number;
  /** How the loop sleeps while work gathers (tests replace it). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Sees each pause before the loop waits it out, unless woken (tests follow the pacing). */
  readonly onPause?: (ms: number) => void;
  /**
   * Sees every failed batch before the pause (e.g. to have lost NATS streams recreated, which no
   * pause alone would bring back).
   */
  readonly onError?: (error: unknown) => void;
}

/** Why a batch runs. */
export interface BatchPass {
  /**
   * The poll started it: no wake-up came since the last batch. Only such a batch that finds
   * nothing says the loop is idle — one started by a wake-up that finds nothing was told of work
   * an earlier batch took (a busy system), and is worth no extra statement to learn when work
   * falls due.
   */
  readonly polled: boolean;
}

/** What a batch reports besides whether more work waits. */
export interface BatchReport {
  readonly more: boolean;
  /** Items the batch handled. */
  readonly handled: number;
  /**
   * The batch found nothing to do and knows of nothing waiting (but what `dueInMs` says): the
   * loop may look less often until woken.
   */
  readonly idle?: boolean;
  /**
   * In how many milliseconds the next work this loop knows of falls due (by the database's clock,
   * so that a caller's clock that differs cannot wake it early again and again); the loop's next
   * pass comes no later.
   */
  readonly dueInMs?: number;
}

/** Pause after a failed batch (Postgres or NATS trouble) before trying again. */
const ERROR_PAUSE_MS = 1_000;

/** The shortest pause until work falls due: it is due by then, or nearly (a clock's granularity). */
const MIN_DUE_PAUSE_MS = 5;

/**
 * The pause after a pass: the poll interval, doubled for each idle pass in a row up to `idlePollMs`
 * (never below the poll interval), and no later than work falls due.
 */
export function pauseAfter(
  pollMs: number,
  idlePollMs: number,
  idleStreak: number,
  dueInMs: number | undefined,
): number {
  const paced =
    idleStreak > 0 ? Math.max(pollMs, Math.min(idlePollMs, pollMs * 2 ** idleStreak)) : pollMs;
  return dueInMs === undefined ? paced : Math.min(paced, Math.max(MIN_DUE_PAUSE_MS, dueInMs));
}

export function startBatchLoop(options: BatchLoopOptions): BatchLoop {
  const waker = new Waker();
  const sleep = options.sleep ?? ((ms: number) => setTimeout(ms));
  const idlePollMs = options.idlePollMs ?? options.pollMs;
  let stopped = false;
  /** The wake-up {@link BatchLoop.wakeIn} set, and when it comes (`performance.now()`). */
  let dueWake: { readonly at: number; readonly timer: NodeJS.Timeout } | undefined;
  /** Idle passes in a row, none of them woken. */
  let idleStreak = 0;
  /** Whether the next batch comes from the poll (the first comes from the start). */
  let polled = false;
  const done = (async () => {
    while (!stopped) {
      let more = false;
      let handled = Number.POSITIVE_INFINITY; // a batch that does not say counts as a full one
      let idle = false;
      let dueInMs: number | undefined;
      try {
        const report = await options.runBatch({ polled });
        if (typeof report === 'boolean') more = report;
        else ({ more, handled, idle = false, dueInMs } = report);
      } catch (error) {
        idleStreak = 0;
        options.log.error({ err: error, loop: options.name }, 'batch failed; retrying');
        try {
          options.onError?.(error);
        } catch (hookError) {
          options.log.error({ err: hookError, loop: options.name }, 'batch error hook failed');
        }
        polled = !(await waker.wait(ERROR_PAUSE_MS));
        continue;
      }
      // A wake-up during the pass means work may have come after it looked.
      idleStreak = idle && !more && !waker.hasWakeUp ? idleStreak + 1 : 0;
      polled = false;
      if (!more && !stopped) {
        const busy = waker.hasWakeUp && handled > 1;
        const pause = pauseAfter(options.pollMs, idlePollMs, idleStreak, dueInMs);
        options.onPause?.(pause);
        polled = !(await waker.wait(pause));
        // Wake-ups meanwhile are kept by the waker (the next wait returns at once); a stop waits
        // at most this long.
        if (busy && options.gatherMs && !stopped) await sleep(options.gatherMs);
      }
    }
  })();
  return {
    wake: () => waker.wake(),
    wakeIn(ms) {
      const at = performance.now() + ms;
      if (stopped || (dueWake !== undefined && dueWake.at <= at)) return;
      if (dueWake !== undefined) clearTimeout(dueWake.timer);
      const timer = globalThis.setTimeout(
        () => {
          dueWake = undefined;
          waker.wake();
        },
        Math.max(0, ms),
      );
      dueWake = { at, timer };
    },
    async stop() {
      stopped = true;
      if (dueWake !== undefined) clearTimeout(dueWake.timer);
      dueWake = undefined;
      waker.wake();
      await done;
    },
  };
}

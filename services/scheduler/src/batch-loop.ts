/**
 * The shape of every scheduler loop: do a batch; if it was full, go again at once (throughput grows
 * with load); otherwise sleep until woken or the poll interval passes (latency stays low and idle
 * costs nothing). Errors are logged and retried after a pause, never fatal.
 */
import { setTimeout } from 'node:timers/promises';
import { Waker } from '@sluice/runtime';
import type { Logger } from '@sluice/telemetry';

/** A running loop. */
export interface BatchLoop {
  /** Runs the next batch now (a wake-up message arrived). */
  wake(): void;
  /** Stops after the current batch. */
  stop(): Promise<void>;
}

/** Options of {@link startBatchLoop}. */
export interface BatchLoopOptions {
  readonly name: string;
  readonly pollMs: number;
  readonly log: Logger;
  /**
   * Does one batch; returns true when there may be more work right away, or a {@link BatchReport}
   * (which also says how much the batch handled, for the gather).
   */
  readonly runBatch: () => Promise<boolean | BatchReport>;
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
  /**
   * Sees every failed batch before the pause (e.g. to have lost NATS streams recreated, which no
   * pause alone would bring back).
   */
  readonly onError?: (error: unknown) => void;
}

/** What a batch reports besides whether more work waits. */
export interface BatchReport {
  readonly more: boolean;
  /** Items the batch handled. */
  readonly handled: number;
}

/** Pause after a failed batch (Postgres or NATS trouble) before trying again. */
const ERROR_PAUSE_MS = 1_000;

export function startBatchLoop(options: BatchLoopOptions): BatchLoop {
  const waker = new Waker();
  const sleep = options.sleep ?? ((ms: number) => setTimeout(ms));
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      let more = false;
      let handled = Number.POSITIVE_INFINITY; // a batch that does not say counts as a full one
      try {
        const report = await options.runBatch();
        if (typeof report === 'boolean') more = report;
        else ({ more, handled } = report);
      } catch (error) {
        options.log.error({ err: error, loop: options.name }, 'batch failed; retrying');
        try {
          options.onError?.(error);
        } catch (hookError) {
          options.log.error({ err: hookError, loop: options.name }, 'batch error hook failed');
        }
        await waker.wait(ERROR_PAUSE_MS);
        continue;
      }
      if (!more && !stopped) {
        const busy = waker.hasWakeUp && handled > 1;
        await waker.wait(options.pollMs);
        // Wake-ups meanwhile are kept by the waker (the next wait returns at once); a stop waits
        // at most this long.
        if (busy && options.gatherMs && !stopped) await sleep(options.gatherMs);
      }
    }
  })();
  return {
    wake: () => waker.wake(),
    async stop() {
      stopped = true;
      waker.wake();
      await done;
    },
  };
}

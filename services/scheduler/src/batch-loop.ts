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
  /** Does one batch; returns true when there may be more work right away. */
  readonly runBatch: () => Promise<boolean>;
  /**
   * After a pause, how long to let work gather before the next batch (0: none). For a loop off
   * the tasks' critical path woken by each of many small commits (the event relay), so that a
   * burst makes one batch and one commit instead of one per wake-up.
   */
  readonly gatherMs?: number;
  /**
   * Sees every failed batch before the pause (e.g. to have lost NATS streams recreated, which no
   * pause alone would bring back).
   */
  readonly onError?: (error: unknown) => void;
}

/** Pause after a failed batch (Postgres or NATS trouble) before trying again. */
const ERROR_PAUSE_MS = 1_000;

export function startBatchLoop(options: BatchLoopOptions): BatchLoop {
  const waker = new Waker();
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      let more = false;
      try {
        more = await options.runBatch();
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
        await waker.wait(options.pollMs);
        // Wake-ups meanwhile are kept by the waker (the next wait returns at once); a stop waits
        // at most this long.
        if (options.gatherMs && !stopped) await setTimeout(options.gatherMs);
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

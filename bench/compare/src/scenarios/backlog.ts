/**
 * The phases of the scenarios that backlog work before any worker runs (drain, footprint,
 * three-step, priority): enqueue everything in chunks, then start the workers and time how long
 * they take to start it all. One definition of the processing window, so the scenarios' rates
 * compare.
 */
import { performance } from 'node:perf_hooks';
import type { Ledger } from '../ledger.js';
import { chunks } from '../pool.js';
import { awaitLedger, type RunFrame } from './framed-run.js';

/** Enqueued per `enqueue` call: small enough for a live progress line, large enough to batch. */
export const ENQUEUE_CHUNK = 1_000;

/** Items per second, 0 for no time at all. */
export function rate(items: number, seconds: number): number {
  return seconds > 0 ? items / seconds : 0;
}

/**
 * How long the workers may take for `units` units of work (jobs, or steps of chains): generous
 * (two minutes, or 10 a second on a shared machine).
 */
export function processingTimeoutMs(units: number): number {
  return Math.max(120_000, (units / 10) * 1_000);
}

/**
 * Enqueues `items` through `enqueue`, {@link ENQUEUE_CHUNK} at a time, telling `onProgress` after
 * each call how many are in and how many seconds it took so far; returns the seconds it took.
 */
export async function enqueueInChunks<T>(
  items: readonly T[],
  enqueue: (slice: T[]) => Promise<void>,
  onProgress: (enqueued: number, seconds: number) => void,
): Promise<number> {
  const start = performance.now();
  let enqueued = 0;
  for (const slice of chunks(items, ENQUEUE_CHUNK)) {
    await enqueue(slice);
    enqueued += slice.length;
    onProgress(enqueued, (performance.now() - start) / 1_000);
  }
  return (performance.now() - start) / 1_000;
}

/** What the workers' run on a backlog measured. */
export interface ProcessingWindow {
  /** When `startWorkers` was called (`performance.now()`). */
  readonly workersStart: number;
  /** When the first job (or step) started, or `workersStart` if none did. */
  readonly first: number;
  /** The processing time, see {@link processBacklog}. */
  readonly seconds: number;
}

/**
 * Starts the workers on a backlog and waits until `completion` has every job (or the timeout,
 * noted on the frame), with a progress line every 250 ms. The processing time runs from when the
 * workers ran (`startWorkers` resolved, or the first start if that came first: a process that
 * reports itself ready after it began work) to the last start `completion` saw.
 */
export async function processBacklog(options: {
  readonly frame: RunFrame;
  /** The ledger whose completion ends the run (its last start ends the window). */
  readonly completion: Ledger;
  /** The first start of any work (default: `completion`'s). */
  readonly firstAt?: () => number | undefined;
  readonly startWorkers: () => Promise<void>;
  /** Runs once the workers are started, before the wait (e.g. to find their processes). */
  readonly afterStart?: () => Promise<void>;
  readonly timeoutMs: number;
  /** The progress line, given when `startWorkers` was called. */
  readonly progressLine: (workersStart: number) => string;
  readonly onProgress: (line: string) => void;
}): Promise<ProcessingWindow> {
  const { completion, frame } = options;
  const firstAt = options.firstAt ?? (() => completion.firstAt);
  const workersStart = performance.now();
  let workersReady = Number.POSITIVE_INFINITY;
  const ticker = setInterval(() => options.onProgress(options.progressLine(workersStart)), 250);
  try {
    await options.startWorkers();
    workersReady = performance.now();
    await options.afterStart?.();
    await awaitLedger(completion, frame, options.timeoutMs);
  } finally {
    clearInterval(ticker);
  }
  const first = firstAt() ?? workersStart;
  const last = completion.lastAt ?? first;
  const seconds = Math.max((last - Math.min(first, workersReady)) / 1_000, 1e-6);
  return { workersStart, first, seconds };
}

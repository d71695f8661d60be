/**
 * The rate a run's jobs started at, against the rate they arrived at (issue 7's end-to-end
 * throughput target compares the rates each system keeps up with), read from the jobs' own start
 * times.
 *
 * The jobs are taken in send order and cut into tenths, and each tenth is represented by the median
 * of its send times and the median of its start times — medians, so that one pause does not move
 * them. Between the second tenth and the last, the start rate is the jobs sent in between over the
 * time between the two start medians, and the arrival rate the same over the two send medians. A
 * system that keeps up starts each job a steady lateness after its send, so the two rates agree; one
 * that falls behind starts them at what it can get through, and its start rate is that — its
 * throughput at that load. The first tenth is left out: it meets workers coming out of idle.
 *
 * No verdict is drawn from the two: a system that polls starts a tenth's jobs at one or two polls,
 * so in a short run its start rate reads up to a tenth either side of its arrivals (pg-boss, with
 * its half-second poll, in runs of 2 s), and one that is behind when the second tenth is sent and
 * catches up later reads faster than its arrivals. The latencies beside it say which, and so does
 * the wait of each tenth (the median of its send → start times): flat where the system kept up,
 * rising through the run where it fell behind, high from the start and flat where a queue formed
 * early and stayed, falling where it caught up.
 */
import { median } from './repeats.js';

/** One measured job: when it was to be sent, and when it started (epoch ms), if it did. */
export interface PacedJob {
  readonly scheduledAt: number;
  readonly startedAt: number | undefined;
}

/** What {@link paceOf} found. */
export interface Pace {
  /** Jobs a second sent, between the second tenth's and the last tenth's medians. */
  readonly arrivalRate: number;
  /** Jobs a second started, over the same jobs. */
  readonly startRate: number;
  /** The median send → start time (ms) of each tenth in send order, the first tenth's first. */
  readonly waitByTenth: readonly number[];
}

/** Fewer started jobs than this give tenths too small for their medians to say anything. */
export const MIN_JOBS_FOR_PACE = 50;

/**
 * The pace of `jobs` (in send order), or `undefined` when fewer than {@link MIN_JOBS_FOR_PACE}
 * of them started or their send times do not advance (a burst, not arrivals at a rate).
 */
export function paceOf(jobs: readonly PacedJob[]): Pace | undefined {
  const started = jobs.filter(
    (job): job is { scheduledAt: number; startedAt: number } => job.startedAt !== undefined,
  );
  if (started.length < MIN_JOBS_FOR_PACE) return undefined;
  const tenths = Array.from({ length: 10 }, (_, index) =>
    started.slice(
      Math.floor((index * started.length) / 10),
      Math.floor(((index + 1) * started.length) / 10),
    ),
  );
  const second = tenths[1]!;
  const last = tenths[9]!;
  // The jobs from the middle of the second tenth to the middle of the last.
  const jobsBetween = started.length * 0.8;
  const sendSpan =
    median(last.map((j) => j.scheduledAt)) - median(second.map((j) => j.scheduledAt));
  const startSpan = median(last.map((j) => j.startedAt)) - median(second.map((j) => j.startedAt));
  if (!(sendSpan > 0)) return undefined;
  const arrivalRate = (jobsBetween * 1_000) / sendSpan;
  // Starts that kept no distance at all (every job of the last tenth started together with the
  // second's) would be an infinite rate: the jobs started as fast as they came.
  const startRate = startSpan > 0 ? (jobsBetween * 1_000) / startSpan : arrivalRate;
  const waitByTenth = tenths.map((jobs) => median(jobs.map((j) => j.startedAt - j.scheduledAt)));
  return { arrivalRate, startRate, waitByTenth };
}

/**
 * Whether a run of arrivals kept pace (issue 7's end-to-end throughput target compares the rates
 * each system keeps up with): the rate its jobs started at, read from their own start times,
 * against the rate they were sent at.
 *
 * The jobs are taken in send order and cut into tenths, and each tenth is represented by the median
 * of its send times and the median of its start times — medians, so that a poll's spread (pg-boss
 * starts a job anywhere within its half-second poll) or one pause does not move them. Between the
 * second tenth and the last, the start rate is the jobs sent in between over the time between the
 * two start medians, and the arrival rate the same over the two send medians. A system that keeps
 * up starts each job a steady lateness after its send, so the two rates agree; one that falls
 * behind starts them at what it can get through, and its start rate is that — an estimate of its
 * throughput at that load. The first tenth is left out: it meets workers coming out of idle.
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
  /** Whether the jobs started at least {@link KEPT_PACE_SHARE} of the rate they arrived at. */
  readonly keptPace: boolean;
}

/**
 * The share of the arrival rate a run must start jobs at to have kept pace. A run that starts 5 %
 * slower than its arrivals ends a twentieth of its length behind, a backlog that only grows.
 */
export const KEPT_PACE_SHARE = 0.95;

/** Fewer started jobs than this give tenths too small for their medians to say anything. */
export const MIN_JOBS_FOR_PACE = 100;

/**
 * The pace of `jobs` (in send order), or `undefined` when fewer than {@link MIN_JOBS_FOR_PACE}
 * of them started or their send times do not advance (a burst, not arrivals at a rate).
 */
export function paceOf(jobs: readonly PacedJob[]): Pace | undefined {
  const started = jobs.filter(
    (job): job is { scheduledAt: number; startedAt: number } => job.startedAt !== undefined,
  );
  if (started.length < MIN_JOBS_FOR_PACE) return undefined;
  const tenth = (index: number) =>
    started.slice(
      Math.floor((index * started.length) / 10),
      Math.floor(((index + 1) * started.length) / 10),
    );
  const second = tenth(1);
  const last = tenth(9);
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
  return { arrivalRate, startRate, keptPace: startRate >= KEPT_PACE_SHARE * arrivalRate };
}

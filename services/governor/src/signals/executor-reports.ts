/**
 * The executors' reports, kept for a short window: the live view of slots in use, LLM 429s and the
 * adaptive limits the executors found, and the step outcomes that feed each tool's breaker.
 *
 * Reports carry cumulative counters, so everything here is a difference between two reports of
 * one executor; an executor that stops reporting for `liveMs` is no longer counted (it died or
 * stopped, and its slots are gone with it).
 */
import type { ExecutorReport } from '@sluice/bus';

interface Received {
  readonly atMs: number;
  readonly report: ExecutorReport;
}

interface ExecutorHistory {
  readonly resource: string;
  /** Oldest first, within the window (always at least the latest). */
  reports: Received[];
  /** The counters already handed to the breakers. */
  consumedSucceeded: number;
  consumedFailed: number;
}

/** Busy and total slots of a resource's live executors. */
export interface ResourceLoad {
  readonly resource: string;
  readonly busy: number;
  readonly slots: number;
  readonly executors: number;
}

/** LLM calls over the window by the live executors of a resource. */
export interface LlmPressure {
  readonly resource: string;
  readonly calls: number;
  readonly rateLimited: number;
  /** Sum of the executors' adaptive limits now. */
  readonly limit: number;
}

/** Step outcomes of a resource since the last {@link ExecutorReports.takeOutcomes}. */
export interface OutcomeDelta {
  readonly succeeded: number;
  readonly failed: number;
}

export class ExecutorReports {
  private readonly executors = new Map<string, ExecutorHistory>();

  /**
   * @param windowMs how far back rates are measured
   * @param liveMs after how long without a report an executor is forgotten
   */
  constructor(
    private readonly windowMs: number,
    private readonly liveMs: number,
  ) {}

  add(report: ExecutorReport, atMs: number): void {
    let history = this.executors.get(report.executor_id);
    if (history === undefined) {
      // Outcomes count from the first report seen: what an executor counted before is no news to
      // the breakers when this governor starts or takes over beside it (its predecessor fed them),
      // nor when it reports again after being forgotten. An executor reports its zeros at start.
      history = {
        resource: report.resource,
        reports: [],
        consumedSucceeded: report.steps_succeeded,
        consumedFailed: report.steps_failed_dependency,
      };
      this.executors.set(report.executor_id, history);
    }
    history.reports.push({ atMs, report });
    // Keep one report older than the window as the base of the window's differences. Outcomes
    // before it are too old to hand out (a standby that nobody asks while it listens).
    while (
      history.reports.length > 2 &&
      (history.reports[1]?.atMs ?? atMs) <= atMs - this.windowMs
    ) {
      const old = history.reports.shift()?.report;
      if (old === undefined) break;
      history.consumedSucceeded = Math.max(history.consumedSucceeded, old.steps_succeeded);
      history.consumedFailed = Math.max(history.consumedFailed, old.steps_failed_dependency);
    }
  }

  /** Forgets executors silent for longer than `liveMs`; returns the live ones. */
  private live(nowMs: number): ExecutorHistory[] {
    const live: ExecutorHistory[] = [];
    for (const [id, history] of this.executors) {
      const latest = history.reports.at(-1);
      if (latest === undefined || nowMs - latest.atMs > this.liveMs) this.executors.delete(id);
      else live.push(history);
    }
    return live;
  }

  /** Slots in use per resource. */
  loads(nowMs: number): ResourceLoad[] {
    const byResource = new Map<string, { busy: number; slots: number; executors: number }>();
    for (const history of this.live(nowMs)) {
      const latest = history.reports.at(-1)?.report;
      if (!latest) continue;
      const load = byResource.get(history.resource) ?? { busy: 0, slots: 0, executors: 0 };
      load.busy += latest.busy;
      load.slots += latest.slots;
      load.executors += 1;
      byResource.set(history.resource, load);
    }
    return [...byResource].map(([resource, load]) => ({ resource, ...load }));
  }

  /** LLM calls and 429s over the window, per resource whose executors call an LLM. */
  llmPressure(nowMs: number): LlmPressure[] {
    const byResource = new Map<string, { calls: number; rateLimited: number; limit: number }>();
    for (const history of this.live(nowMs)) {
      const latest = history.reports.at(-1)?.report.llm;
      if (latest === undefined) continue;
      // The base: the newest report at or before the window's start, else the oldest kept (whose
      // counters started at zero when the executor did, if it is the first report).
      const base = history.reports.length > 1 ? history.reports[0]?.report.llm : undefined;
      const entry = byResource.get(history.resource) ?? { calls: 0, rateLimited: 0, limit: 0 };
      entry.calls += latest.calls - (base?.calls ?? 0);
      entry.rateLimited += latest.rate_limited - (base?.rate_limited ?? 0);
      entry.limit += latest.limit;
      byResource.set(history.resource, entry);
    }
    return [...byResource].map(([resource, entry]) => ({ resource, ...entry }));
  }

  /** Step outcomes per resource since the last call (each outcome is handed out once). */
  takeOutcomes(nowMs: number): Map<string, OutcomeDelta> {
    const deltas = new Map<string, OutcomeDelta>();
    for (const history of this.live(nowMs)) {
      const latest = history.reports.at(-1)?.report;
      if (!latest) continue;
      const succeeded = Math.max(0, latest.steps_succeeded - history.consumedSucceeded);
      const failed = Math.max(0, latest.steps_failed_dependency - history.consumedFailed);
      history.consumedSucceeded = latest.steps_succeeded;
      history.consumedFailed = latest.steps_failed_dependency;
      if (succeeded === 0 && failed === 0) continue;
      const sum = deltas.get(history.resource) ?? { succeeded: 0, failed: 0 };
      deltas.set(history.resource, {
        succeeded: sum.succeeded + succeeded,
        failed: sum.failed + failed,
      });
    }
    return deltas;
  }
}

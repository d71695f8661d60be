/**
 * The task lifecycle metrics — queue wait, run time, approval wait, cancellations — derived from the
 * `task_events` rows the event relay publishes.
 *
 * Why here and not where each transition is applied: a task starts in an executor, is cancelled by
 * the gateway (queued, paused, waiting) or by the scheduler's settler (running, once its step
 * stops), is rejected by the gateway and times out in the scheduler's timer firer. Counting at each
 * of those places would miss one or count one twice; every transition, whoever applied it, is one
 * event row, and one mark takes it out of the outbox: only the relay whose mark that was observes
 * it (after a change of lease holder the old and the new one may both mark it). Observations are
 * made after the rows are marked, so a relay that crashes before marking publishes them again and
 * observes them then, once (a crash after marking loses them, but it also resets this process's
 * counters, which Prometheus treats as a restart).
 *
 * The durations come from the rows' commit-time clocks (`created_at` of each event), not from when
 * the relay saw them, so relay lag never inflates them.
 */
import {
  TaskStatus,
  isFinalStatus,
  isPriority,
  isTaskStatus,
  priorityLabel,
  type Json,
} from '@sluice/core';
import { listTaskEvents, type Database, type TaskEventRecord } from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import type { TaskHistory } from './task-history.js';

/** The facts of an event row the metrics read. */
export type EventFacts = Pick<
  TaskEventRecord,
  'seq' | 'type' | 'fromStatus' | 'toStatus' | 'data' | 'createdAt'
>;

/** How an approval wait ended: the `decision` label of `sluice_approval_wait_time_seconds`. */
export type ApprovalDecision = 'approved' | 'rejected' | 'timed_out' | 'cancelled';

/** One thing to record about an event. */
export type TaskObservation =
  | {
      /** `wait`: created (or retried) → first start; `run`: first start → final state. */
      readonly kind: 'wait' | 'run';
      readonly priority: string;
      readonly type: string;
      readonly seconds: number;
    }
  | {
      readonly kind: 'approval_wait';
      readonly decision: ApprovalDecision;
      readonly seconds: number;
    }
  | { readonly kind: 'cancelled' };

const APPROVAL_DECISIONS: Readonly<Record<string, ApprovalDecision>> = {
  approve: 'approved',
  reject: 'rejected',
  approval_timeout: 'timed_out',
  cancel: 'cancelled',
};

/** Whether observing `event` needs the task's earlier events (else the row alone says it). */
export function needsHistory(event: EventFacts): boolean {
  return (
    event.type === 'start' ||
    event.fromStatus === TaskStatus.WaitingApproval ||
    (isTaskStatus(event.toStatus) && isFinalStatus(event.toStatus))
  );
}

/**
 * What `event` implies for the metrics, given the task's events before it (`before`, ascending
 * sequence). Pure.
 * - `start` that is the first since the task was created or retried: a queue wait, from that
 *   `create` / `retry` event to this one.
 * - a move into a final state (`succeeded`, `failed_terminal`, `cancelled`) of an attempt that
 *   started: a run time, from the attempt's first `start`.
 * - a move into `cancelled`, however it came about: a cancellation.
 * - a move out of `waiting_approval`: an approval wait, from the latest move into it (the ask, or
 *   a resume that asks again), by how it ended.
 * Priority and type come from the `create` event's data; without it (history deleted) no wait or
 * run is observed.
 */
export function observe(before: readonly EventFacts[], event: EventFacts): TaskObservation[] {
  const observations: TaskObservation[] = [];
  const created = before.find((e) => e.type === 'create');
  const labels = created ? labelsOf(created.data) : undefined;
  const origin = before.findLast((e) => e.type === 'create' || e.type === 'retry');
  const firstStart = origin && before.find((e) => e.seq > origin.seq && e.type === 'start');
  if (event.type === 'start' && labels && origin && !firstStart) {
    observations.push({ kind: 'wait', ...labels, seconds: secondsBetween(origin, event) });
  }
  const becomesFinal =
    isTaskStatus(event.toStatus) &&
    isFinalStatus(event.toStatus) &&
    !(isTaskStatus(event.fromStatus) && isFinalStatus(event.fromStatus));
  if (becomesFinal && labels && firstStart) {
    observations.push({ kind: 'run', ...labels, seconds: secondsBetween(firstStart, event) });
  }
  if (event.fromStatus === TaskStatus.WaitingApproval && event.toStatus !== event.fromStatus) {
    const asked = before.findLast((e) => e.toStatus === TaskStatus.WaitingApproval);
    const decision = APPROVAL_DECISIONS[event.type];
    if (asked && decision) {
      observations.push({ kind: 'approval_wait', decision, seconds: secondsBetween(asked, event) });
    }
  }
  if (event.toStatus === TaskStatus.Cancelled && event.fromStatus !== TaskStatus.Cancelled) {
    observations.push({ kind: 'cancelled' });
  }
  return observations;
}

/** Records one observation. */
export function record(metrics: Metrics, observation: TaskObservation): void {
  switch (observation.kind) {
    case 'wait':
      metrics.taskWaitTime.observe(labelsFor(observation), observation.seconds);
      return;
    case 'run':
      metrics.taskRunTime.observe(labelsFor(observation), observation.seconds);
      return;
    case 'approval_wait':
      metrics.approvalWaitTime.observe({ decision: observation.decision }, observation.seconds);
      return;
    case 'cancelled':
      metrics.cancellations.inc();
      return;
  }
}

/** What {@link recordTaskMetrics} needs. */
export interface TaskMetricsDeps {
  readonly db: Database;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The earlier events of tasks seen so far; one per relay (see task-history.ts). */
  readonly taskHistory: TaskHistory;
}

/**
 * Records the lifecycle metrics of events just marked published (ascending sequence per task).
 * The earlier events an observation looks back at come from `taskHistory`; a task it does not
 * know from its first event on is read from Postgres (one query per such task, up to its first
 * event here). Never throws: a failed read loses that task's observations, logged, and the relay
 * goes on.
 */
export async function recordTaskMetrics(
  deps: TaskMetricsDeps,
  events: readonly TaskEventRecord[],
): Promise<void> {
  // Tasks whose earlier events are needed but not remembered: read up to their first event here.
  const needing = new Set(events.filter(needsHistory).map((event) => event.taskId));
  const toRead = new Map<string, number>();
  const firstSeen = new Set<string>();
  for (const event of events) {
    if (firstSeen.has(event.taskId)) continue;
    firstSeen.add(event.taskId);
    const known = deps.taskHistory.before(event.taskId, event.seq) !== undefined;
    if (!known && needing.has(event.taskId)) toRead.set(event.taskId, event.seq);
  }
  await Promise.all(
    [...toRead].map(async ([taskId, firstSeq]) => {
      try {
        const earlier = await listTaskEvents(deps.db, taskId, 0, firstSeq - 1);
        deps.taskHistory.load(taskId, earlier, firstSeq - 1);
      } catch (error) {
        deps.log.warn({ err: error, task_id: taskId }, 'task metrics not recorded');
      }
    }),
  );
  for (const event of events) {
    const before = deps.taskHistory.before(event.taskId, event.seq);
    deps.taskHistory.append(event.taskId, event);
    // Unknown only when its read failed (logged): those observations are lost.
    if (needsHistory(event) && before === undefined) continue;
    for (const observation of observe(before ?? [], event)) record(deps.metrics, observation);
  }
}

function labelsOf(data: Record<string, Json> | null): { priority: string; type: string } {
  const priority = data?.['priority'];
  const type = data?.['type'];
  return {
    priority: isPriority(priority) ? priorityLabel(priority) : 'unknown',
    type: typeof type === 'string' ? type : 'unknown',
  };
}

function labelsFor(observation: { readonly priority: string; readonly type: string }) {
  return { priority: observation.priority, type: observation.type };
}

function secondsBetween(from: EventFacts, to: EventFacts): number {
  return Math.max(0, to.createdAt.getTime() - from.createdAt.getTime()) / 1_000;
}

/**
 * The event relay: publishes `task_events` rows in order to `sluice.events.<tenant>.<task>` on
 * JetStream (the outbox pattern), then marks them published. At least once: a crash between
 * publish and mark republishes, and the stream's duplicate window plus subscribers' sequence checks
 * absorb it. Only the holder of the `relay` lease runs it, so one writer keeps per-task order.
 * The events it marks are also where the task lifecycle metrics come from (task-metrics.ts).
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { encodeMessage, eventMsgId, publishDurable, type BusCatalog } from '@sluice/bus';
import {
  markEventsPublished,
  unpublishedEvents,
  type Database,
  type TaskEventRecord,
} from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import type { BatchReport } from './batch-loop.js';
import type { TaskHistory } from './task-history.js';
import { recordTaskMetrics } from './task-metrics.js';

/** What the relay needs. */
export interface EventRelayDeps {
  readonly db: Database;
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly batchSize: number;
  /** Earlier events of the tasks relayed, for the lifecycle metrics (task-history.ts). */
  readonly taskHistory: TaskHistory;
  /** Sees each failed publication (a missing stream must be recreated before any can succeed). */
  readonly onPublishFailed?: (error: unknown) => void;
}

/**
 * Publishes one batch. Publications are pipelined on one connection, so the stream stores them in
 * the order sent (ascending `id`, hence ascending per-task sequence). An event whose publication
 * failed stays unpublished and is retried with the next batch; events of the same task after it
 * are held back too, so a task's events are never marked published out of order. Reports whether
 * a full batch was published (more may wait) and how many events it read.
 */
export async function relayEventBatch(deps: EventRelayDeps): Promise<BatchReport> {
  const events = await unpublishedEvents(deps.db, deps.batchSize);
  if (events.length === 0) return { more: false, handled: 0, idle: true };
  const results = await Promise.allSettled(events.map((event) => publish(deps, event)));
  const blockedTasks = new Set<string>();
  const published: number[] = [];
  results.forEach((result, index) => {
    const event = events[index] as TaskEventRecord;
    if (result.status === 'fulfilled' && !blockedTasks.has(event.taskId)) {
      published.push(event.id);
    } else {
      blockedTasks.add(event.taskId);
      if (result.status === 'rejected') {
        deps.log.warn({ err: result.reason, task_id: event.taskId }, 'event relay publish failed');
        deps.onPublishFailed?.(result.reason);
      }
    }
  });
  await markEventsPublished(deps.db, published);
  deps.metrics.eventsRelayed.inc(published.length);
  // Observed once marked, so each event is observed once (see task-metrics.ts).
  const marked = new Set(published);
  await recordTaskMetrics(
    deps,
    events.filter((event) => marked.has(event.id)),
  );
  return {
    more: events.length === deps.batchSize && blockedTasks.size === 0,
    handled: events.length,
  };
}

function publish(deps: EventRelayDeps, event: TaskEventRecord) {
  return publishDurable(
    deps.js,
    deps.catalog.subjects.events(event.tenantId, event.taskId),
    encodeMessage({
      type: 'task.event',
      task_id: event.taskId,
      tenant_id: event.tenantId,
      seq: event.seq,
      event: event.type,
      from_status: event.fromStatus,
      to_status: event.toStatus,
      step: event.step,
      at: event.createdAt.toISOString(),
    }),
    { msgID: eventMsgId(event.taskId, event.seq) },
  );
}

/**
 * The event relay: publishes `task_events` rows in order to `sluice.events.<tenant>.<task>` on
 * JetStream (the outbox pattern), then marks them published. At least once: a crash between
 * publish and mark republishes, and the stream's duplicate window plus subscribers' sequence checks
 * absorb it. Only the holder of the `relay` lease runs it, so one writer keeps per-task order.
 * The events it marks are also where the task lifecycle metrics come from (task-metrics.ts).
 *
 * Marks gather and go with a later batch's read, one statement for both: on a quiet system each
 * batch relays the events of one commit (a create, a step's start, its outcome), and a mark of
 * their own cost every batch a second round trip — and a write, a transaction id and a commit
 * that waits for the disk. So the reads leave the published events out until the oldest has
 * waited {@link MARK_WAIT_MS} (or a batch's worth are waiting), and the read after that marks
 * them all; when no read comes by then, a batch runs for the marks alone. A crash republishes at
 * most that much more, well within the stream's duplicate window (two minutes).
 */
import type { JetStreamClient } from '@nats-io/jetstream';
import { encodeMessage, eventMsgId, publishDurable, type BusCatalog } from '@sluice/bus';
import {
  markEventsPublished,
  markPublishedAndReadUnpublished,
  unpublishedEvents,
  type Database,
  type TaskEventRecord,
} from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import type { BatchReport } from './batch-loop.js';
import type { TaskHistory } from './task-history.js';
import { recordTaskMetrics } from './task-metrics.js';

/**
 * How long published events wait for their mark: the first read after that carries the marks of
 * all that waited, and a batch runs for them alone when no read comes.
 */
export const MARK_WAIT_MS = 100;

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
  /** Milliseconds on a monotonic clock (default `performance.now`; tests move their own). */
  readonly now?: () => number;
}

/** The relay of one lease tenure: its batches, and the marks one batch leaves to the next. */
export interface EventRelay {
  /**
   * Reads the next batch and publishes it, and marks the earlier batches' publications in the
   * same statement once they are due (see the module comment). The tasks' publications go at
   * once on one connection, each task's events one after another (ascending per-task sequence),
   * so the stream stores a task's events in order. An event whose publication failed stays
   * unpublished and is retried with the next batch; events of the same task after it are not sent
   * until then, so they never reach the stream before it. Reports whether a full batch was
   * published (more may wait), how many events it read, and when the waiting marks are due.
   */
  runBatch(): Promise<BatchReport>;
  /**
   * Marks what was published and is not marked yet: the lease ends or the scheduler stops. Not
   * while a batch runs.
   */
  flush(): Promise<void>;
  /** Events published and not marked yet. */
  readonly unmarked: number;
}

export function createEventRelay(deps: EventRelayDeps): EventRelay {
  const now = deps.now ?? (() => performance.now());
  /** Published by earlier batches, to be marked by a later statement. */
  let unmarked: TaskEventRecord[] = [];
  /** When the oldest of {@link unmarked} was published. */
  let unmarkedSince = 0;

  /**
   * Counts and observes the events whose marks this relay wrote (`markedIds`), once each (see
   * task-metrics.ts): after a change of lease holder the old and the new one may both publish and
   * mark an event, and only the one whose mark took it out of the outbox counts it.
   */
  const marked = async (events: readonly TaskEventRecord[], markedIds: readonly number[]) => {
    const ids = new Set(markedIds);
    const ours = events.filter((event) => ids.has(event.id));
    if (ours.length === 0) return;
    deps.metrics.eventsRelayed.inc(ours.length);
    await recordTaskMetrics(deps, ours);
  };
  const markWaitLeft = () => Math.max(0, unmarkedSince + MARK_WAIT_MS - now());
  /** The marks go with this batch's read: they waited long enough, or a batch's worth wait. */
  const marksDue = () =>
    unmarked.length > 0 && (unmarked.length >= deps.batchSize || markWaitLeft() === 0);
  /** Reads the next batch, marking the waiting publications in the same statement once due. */
  const readWithDueMarks = async (): Promise<TaskEventRecord[]> => {
    const ids = unmarked.map((event) => event.id);
    if (!marksDue()) return unpublishedEvents(deps.db, deps.batchSize, ids);
    const marking = unmarked;
    const read = await markPublishedAndReadUnpublished(deps.db, ids, deps.batchSize);
    unmarked = [];
    await marked(marking, read.marked);
    return read.events;
  };

  return {
    get unmarked() {
      return unmarked.length;
    },

    async runBatch() {
      const events = await readWithDueMarks();
      if (events.length === 0) {
        return unmarked.length > 0
          ? { more: false, handled: 0, dueInMs: markWaitLeft() }
          : { more: false, handled: 0, idle: true };
      }
      const published = await publishInOrder(deps, events);
      if (published.events.length > 0) {
        if (unmarked.length === 0) unmarkedSince = now();
        unmarked = unmarked.concat(published.events);
      }
      return {
        more: events.length === deps.batchSize && !published.heldBack,
        handled: events.length,
        ...(unmarked.length > 0 ? { dueInMs: markWaitLeft() } : {}),
      };
    },

    async flush() {
      const marking = unmarked;
      if (marking.length === 0) return;
      const markedIds = await markEventsPublished(
        deps.db,
        marking.map((event) => event.id),
      );
      unmarked = [];
      await marked(marking, markedIds);
    },
  };
}

/**
 * Publishes `events` (ascending `id`): the tasks at once, each task's events one after another,
 * stopping at the first that fails. Sent all at once, a task's later event could be stored before
 * an earlier one whose publication failed or was retried after a backoff (publishDurable), and
 * subscribers promised a task's events in order would read them out of order; stopped there, the
 * next batch sends the failed one and then the rest. Answers those published and whether any was
 * held back.
 */
async function publishInOrder(
  deps: EventRelayDeps,
  events: readonly TaskEventRecord[],
): Promise<{ events: TaskEventRecord[]; heldBack: boolean }> {
  const byTask = new Map<string, TaskEventRecord[]>();
  for (const event of events) {
    const ofTask = byTask.get(event.taskId);
    if (ofTask === undefined) byTask.set(event.taskId, [event]);
    else ofTask.push(event);
  }
  const published = new Set<TaskEventRecord>();
  let heldBack = false;
  await Promise.all(
    [...byTask.values()].map(async (ofTask) => {
      for (const event of ofTask) {
        try {
          await publish(deps, event);
        } catch (error) {
          heldBack = true;
          deps.log.warn({ err: error, task_id: event.taskId }, 'event relay publish failed');
          deps.onPublishFailed?.(error);
          return;
        }
        published.add(event);
      }
    }),
  );
  return { events: events.filter((event) => published.has(event)), heldBack };
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

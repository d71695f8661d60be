/**
 * The business handlers of `sluice.v1.TaskService`. Every call authenticates first (the tenant
 * comes from the API key, never from the request); a task of another tenant is `NOT_FOUND`, as a
 * missing one. Reads come from Postgres; the gateway keeps no task state in memory.
 *
 * The creates are in task-creation.ts, the key and task-type reads every call starts with in
 * caller-reads.ts; here are the reads of tasks (`GetTask`, `ListTasks`, `WatchTask`) and the
 * lifecycle requests (cancel, pause, resume, retry, approve).
 */
import type { ServerWritableStream } from '@grpc/grpc-js';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { encodeMessage, type BusCatalog, type DecisionView, type GuardCapsView } from '@sluice/bus';
import { isFinalStatus, isTaskStatus, taskTypeProblem, type Priority } from '@sluice/core';
import {
  findTask,
  isUuid,
  listTaskEvents,
  listTasks,
  nextAttemptAt,
  queueStanding,
  type AdmissionSettings,
  type Database,
  type TaskRecord,
} from '@sluice/db';
import type { Tracer } from '@opentelemetry/api';
import {
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_FROM,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_TASK_TRANSITION,
  activeSpan,
  withContinuedSpan,
  type Logger,
  type Metrics,
} from '@sluice/telemetry';
import {
  aborted,
  failedPrecondition,
  invalidArgument,
  notFound,
  type TaskServiceHandlers,
} from '../grpc/index.js';
import {
  fromTimestamp,
  type Timestamp,
  type WatchTaskRequest,
  type WatchTaskResponse,
} from '@sluice/api';
import type { FaultInjection } from '../fault-injection.js';
import { CallerReads } from './caller-reads.js';
import type { EventHub } from './event-hub.js';
import {
  cancelTask,
  decideApproval,
  pauseTask,
  resumeTask,
  retryTask,
  type LifecycleResult,
} from './lifecycle.js';
import { eventToApi, priorityFromApi, statusFromApi, taskToApi } from './mapping.js';
import { decodePageToken, encodePageToken } from './page-token.js';
import { createTaskCreation } from './task-creation.js';
import { waitingReason } from './waiting-reason.js';

/** What the handlers need. */
export interface TaskServiceDeps {
  readonly db: Database;
  readonly nc: NatsConnection;
  readonly catalog: BusCatalog;
  readonly hub: EventHub;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Opens each task's root span, whose trace id the task keeps. */
  readonly tracer: Tracer;
  readonly maxInputBytes: number;
  readonly watchRecheckMs: number;
  /** Test-only crash points (`SLUICE_FAULT_INJECTION`); inert unless a fault is set. */
  readonly faultInjection?: FaultInjection;
  /** The governor's live decision (which priorities `CreateTask` rejects now). */
  readonly decisions?: DecisionView;
  /** The schedulers' urgent-wait guard caps, which `GetTask` names among the reasons of a wait. */
  readonly guardCaps?: GuardCapsView;
  /**
   * The urgent claim (`SLUICE_URGENT_CLAIM`): a create of P0 work claims its first steps in its own
   * transaction, within `admission` (the scheduler's configured admission) and the governor's
   * decision, and publishes them before it answers. Absent: the scheduler admits every step.
   */
  readonly urgentClaim?: { readonly js: JetStreamClient; readonly admission: AdmissionSettings };
}

/**
 * Longest accepted free text of a person's request (a cancel's reason, an approval's comment), in
 * characters (code points).
 */
export const MAX_REQUEST_TEXT_LENGTH = 4_000;

/** Page size of `ListTasks` when the caller gives none, and the most one page holds. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

export function createTaskService(deps: TaskServiceDeps): Partial<TaskServiceHandlers> {
  const reads = new CallerReads(deps.db);
  const requireTask = async (tenantId: string, taskId: string): Promise<TaskRecord> => {
    checkTaskId(taskId);
    const task = await findTask(deps.db, tenantId, taskId);
    if (!task) throw notFound(`task ${taskId} not found`);
    return task;
  };

  /** Answers a refused request, or does what a done one asks for outside Postgres. */
  const settle = (result: LifecycleResult, taskId: string): void => {
    if (!result.ok) {
      if (result.code === 'not_found') throw notFound(`task ${taskId} not found`);
      if (result.code === 'conflict') throw aborted(result.reason);
      throw failedPrecondition(result.reason);
    }
    if (result.abortRunning) {
      // Running steps are aborted by their executors; the scheduler then settles the task.
      deps.nc.publish(
        deps.catalog.subjects.cancel(taskId),
        encodeMessage({ type: 'task.cancel', task_id: taskId }),
      );
    }
    if (result.wakeScheduler) {
      deps.nc.publish(
        deps.catalog.subjects.wake('scheduler'),
        encodeMessage({ type: 'wake', reason: 'task.lifecycle' }),
      );
    }
  };
  /** The task as the API shows it, with its queue standing when it waits to start. */
  const describe = async (tenantId: string, taskId: string) =>
    (await describeRecord(tenantId, taskId)).api;
  const describeRecord = async (tenantId: string, taskId: string) => {
    const task = await requireTask(tenantId, taskId);
    // A retry whose backoff is over waits for admission like any ready step.
    const waits = ['queued', 'running', 'failed_retryable'].includes(task.status);
    const standing = waits ? await queueStanding(deps.db, task.id) : undefined;
    const nextAttempt =
      task.status === 'failed_retryable' ? await nextAttemptAt(deps.db, task.id) : undefined;
    const waitingFor = standing
      ? waitingReason(
          deps.decisions?.current(),
          task.priority as Priority,
          standing.resource,
          deps.guardCaps?.capOf(standing.resource),
        )
      : '';
    const api = taskToApi(
      task,
      task.status === 'queued' ? standing : undefined,
      nextAttempt,
      waitingFor,
    );
    return { record: task, api };
  };

  /**
   * Runs a person's or caller's lifecycle request (`action`: cancel, pause, resume, retry, approve,
   * reject) in a `sluice.task.<action>` span of the task's own trace — a child of its stored
   * traceparent, linked to the RPC span of the request, which belongs to the caller's trace — with
   * the state change as an event, and answers with the task as it is then.
   */
  const inTaskTrace = async (
    tenantId: string,
    taskId: string,
    action: string,
    run: () => Promise<LifecycleResult>,
  ) => {
    const before = await requireTask(tenantId, taskId);
    const request = activeSpan()?.spanContext();
    return withContinuedSpan(
      deps.tracer,
      before.traceParent,
      `sluice.task.${action}`,
      {
        attributes: {
          [ATTR_TASK_ID]: taskId,
          [ATTR_TENANT]: tenantId,
          [ATTR_TASK_TYPE]: before.type,
        },
        ...(request ? { links: [{ context: request }] } : {}),
      },
      async (span) => {
        // The stored id: executors know a running step by it (the request may spell it in capitals).
        settle(await run(), before.id);
        const after = await describeRecord(tenantId, taskId);
        span.addEvent(EVENT_TASK_TRANSITION, {
          [ATTR_TASK_EVENT]: action,
          [ATTR_TASK_STATUS_FROM]: before.status,
          [ATTR_TASK_STATUS_TO]: after.record.status,
        });
        return { task: after.api };
      },
    );
  };

  return {
    ...createTaskCreation(deps, reads),

    async GetTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      checkTaskId(call.request.task_id);
      return { task: await describe(tenantId, call.request.task_id) };
    },

    async ListTasks(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const request = call.request;
      if (request.page_size < 0) {
        throw invalidArgument('page_size', 'page_size must not be negative');
      }
      // A larger page than the server gives is lowered to it, as the API says (the caller pages on).
      const limit =
        request.page_size === 0 ? DEFAULT_PAGE_SIZE : Math.min(request.page_size, MAX_PAGE_SIZE);
      const unspecified = request.status === 'TASK_STATUS_UNSPECIFIED' || request.status === 0;
      const status = unspecified ? undefined : statusFromApi(request.status);
      if (!unspecified && status === undefined) {
        throw invalidArgument('status', 'status is not a known TaskStatus');
      }
      if (request.type !== '' && taskTypeProblem(request.type)) {
        throw invalidArgument('type', taskTypeProblem(request.type) ?? 'invalid type');
      }
      const unspecifiedPriority =
        request.priority === 'PRIORITY_UNSPECIFIED' || request.priority === 0;
      const priority = unspecifiedPriority ? undefined : priorityFromApi(request.priority);
      if (!unspecifiedPriority && priority === undefined) {
        throw invalidArgument('priority', 'priority is not one of PRIORITY_P0 … PRIORITY_P3');
      }
      const createdAfter = timeFilter(request.created_after, 'created_after');
      const createdBefore = timeFilter(request.created_before, 'created_before');
      const filters = {
        ...(status && isTaskStatus(status) ? { status } : {}),
        ...(request.type === '' ? {} : { type: request.type }),
        ...(priority === undefined ? {} : { priority }),
        ...(createdAfter ? { createdAfter } : {}),
        ...(createdBefore ? { createdBefore } : {}),
      };
      const after =
        request.page_token === '' ? undefined : decodePageToken(request.page_token, filters);
      if (after === null) {
        throw invalidArgument(
          'page_token',
          'page_token did not come from a previous ListTasks response with the same filters',
        );
      }
      const rows = await listTasks(deps.db, {
        tenantId,
        limit: limit + 1,
        ...filters,
        ...(after ? { after } : {}),
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        tasks: page.map((task) => taskToApi(task)),
        next_page_token: rows.length > limit && last ? encodePageToken(last, filters) : '',
      };
    },

    async CancelTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const { task_id: taskId, reason } = call.request;
      checkTaskId(taskId);
      checkRequestText('reason', reason);
      // Not counted here: a cancel of a running task only requests it. sluice_cancellations_total
      // counts tasks that became cancelled, from their events (the scheduler's task-metrics.ts).
      return inTaskTrace(tenantId, taskId, 'cancel', () =>
        cancelTask(deps.db, { tenantId, taskId }, reason),
      );
    },

    async PauseTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'pause', () => pauseTask(deps.db, { tenantId, taskId }));
    },

    async ResumeTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'resume', () =>
        resumeTask(deps.db, { tenantId, taskId }),
      );
    },

    async RetryTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'retry', () => retryTask(deps.db, { tenantId, taskId }));
    },

    async ApproveTask(call) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const { task_id: taskId, approved, comment } = call.request;
      checkTaskId(taskId);
      checkRequestText('comment', comment);
      return inTaskTrace(tenantId, taskId, approved ? 'approve' : 'reject', () =>
        decideApproval(deps.db, { tenantId, taskId }, { approved, comment }),
      );
    },

    async WatchTask(call, context) {
      const { tenantId } = await reads.authenticate(call.metadata);
      const afterSeq = parseAfterSeq(call.request);
      const task = await requireTask(tenantId, call.request.task_id);
      // Only the events after `after_seq` are sent: past the last one, the task's next events (its
      // end among them) would never be, and the watch would wait for good.
      if (afterSeq > task.lastEventSeq) {
        throw invalidArgument(
          'after_seq',
          `after_seq ${afterSeq} is past the task's last event (${task.lastEventSeq}); pass a sequence a watch or GetTask's last_event_seq gave`,
        );
      }
      // A task final already: its stream ends once it has sent up to the task's last event.
      const finishedAt =
        isTaskStatus(task.status) && isFinalStatus(task.status) ? task.lastEventSeq : undefined;
      await streamEvents(deps, call, task.id, afterSeq, finishedAt, context.signal);
    },
  };
}

/**
 * Refuses a `task_id` that cannot name any task: empty, or not a UUID. Such an id is a caller's
 * mistake (`INVALID_ARGUMENT`, as the API documents), not a task that happens to be missing; and it
 * must never reach a query that casts it to `uuid`, where Postgres would reject it as an error.
 */
function checkTaskId(taskId: string): void {
  if (taskId === '') throw invalidArgument('task_id', 'task_id is required');
  if (!isUuid(taskId)) throw invalidArgument('task_id', 'task_id must be a task id (a UUID)');
}

/**
 * Refuses free text a task's event records (a cancel's reason, an approval's comment) that is longer
 * than {@link MAX_REQUEST_TEXT_LENGTH} or that Postgres cannot store: U+0000 (NUL), which `jsonb`
 * refuses (valid UTF-8 on the wire, so it arrives; the write then failed, answering `INTERNAL`).
 */
function checkRequestText(field: string, text: string): void {
  // Characters (code points), as the API says and as the admin texts count: `length` counts an
  // emoji twice.
  if (text.length > MAX_REQUEST_TEXT_LENGTH && [...text].length > MAX_REQUEST_TEXT_LENGTH) {
    throw invalidArgument(field, `${field} must be at most ${MAX_REQUEST_TEXT_LENGTH} characters`);
  }
  if (text.includes('\u0000')) {
    throw invalidArgument(
      field,
      `${field} holds the character U+0000 (NUL), which cannot be stored; remove or replace it`,
    );
  }
}

/** A time filter of ListTasks, or `undefined` when unset. */
function timeFilter(value: Timestamp | null, field: string): Date | undefined {
  if (value === null) return undefined;
  try {
    return fromTimestamp(value);
  } catch {
    throw invalidArgument(field, `${field} is not a valid time`);
  }
}

/** The largest event sequence: `task_events.seq` is an `integer`. */
const MAX_EVENT_SEQ = 2_147_483_647;

function parseAfterSeq(request: WatchTaskRequest): number {
  const value = Number(request.after_seq === '' ? '0' : request.after_seq);
  // Past the column's range the read of the events failed (INTERNAL), not just found none.
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_EVENT_SEQ) {
    throw invalidArgument(
      'after_seq',
      `after_seq must be a non-negative event sequence, at most ${MAX_EVENT_SEQ}`,
    );
  }
  return value;
}

/** Events a watch reads at a time. */
const WATCH_READ_EVENTS = 1_000;

/**
 * Replays the task's events after `afterSeq` from Postgres, then follows new ones: each notice (or
 * a periodic re-check, in case a notice was lost) makes it read the events it has not sent yet,
 * in sequence. Ends after the event that takes the task to a final state (unless a later event, a
 * retry's, follows it in the history), and, for a task that was
 * final when the watch began (`finishedAt`, its last sequence then), once nothing up to that
 * sequence is left to send: a caller that saw the final event already (`afterSeq` at it,
 * a reconnect after the stream broke) would otherwise wait for an event that never comes. An
 * event after `finishedAt` (a retry since) makes it follow the task as any other.
 */
async function streamEvents(
  deps: TaskServiceDeps,
  call: ServerWritableStream<WatchTaskRequest, WatchTaskResponse>,
  taskId: string,
  afterSeq: number,
  finishedAt: number | undefined,
  signal: AbortSignal,
): Promise<void> {
  let lastSent = afterSeq;
  /** Whether the last transition sent put the task in a final state. */
  let finalSent = false;
  let endAt = finishedAt;
  let wake: (() => void) | undefined;
  let pending = true; // read once at start, whatever the notices say
  // Listening before the first read: an event committed after it is then noticed.
  const stopListening = await deps.hub.listen(taskId, (seq) => {
    if (seq <= lastSent) return;
    pending = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  try {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      if (pending) {
        pending = false;
        const events = await listTaskEvents(deps.db, taskId, lastSent, WATCH_READ_EVENTS);
        // A full read may have left events behind: read on at once, not at the next notice. A
        // notice that came during the read (pending set again) may be of an event committed after
        // its snapshot: kept, it makes the next read at once too, not at the re-check.
        if (events.length === WATCH_READ_EVENTS) pending = true;
        for (const event of events) {
          await write(call, { event: eventToApi(event) }, signal);
          lastSent = event.seq;
          if (endAt !== undefined && event.seq > endAt) endAt = undefined;
          // A fact about a step (no status) leaves the task in the state it was.
          const to = event.toStatus;
          if (to !== null && isTaskStatus(to)) finalSent = isFinalStatus(to);
        }
        // A final state ends the watch once the events sent after it left the task there: in a
        // history replayed, a RetryTask's `retry` may follow it (the task ran again), and the
        // watch then follows that attempt.
        if (finalSent && !pending) return;
        if (endAt !== undefined && lastSent >= endAt) return;
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deps.watchRecheckMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
      pending = true;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    stopListening();
  }
}

/**
 * Writes one response, waiting for the stream to drain when its buffer is full, or rejects with
 * `signal`'s reason once it aborts: a call cancelled meanwhile (by its client or its deadline)
 * never drains, and the watch would otherwise wait for good, listening still.
 */
async function write(
  call: ServerWritableStream<WatchTaskRequest, WatchTaskResponse>,
  response: WatchTaskResponse,
  signal: AbortSignal,
): Promise<void> {
  if (call.write(response)) return;
  await new Promise<void>((resolve, reject) => {
    const drained = () => {
      signal.removeEventListener('abort', aborted);
      resolve();
    };
    const aborted = () => {
      call.removeListener('drain', drained);
      reject(signal.reason as Error);
    };
    call.once('drain', drained);
    signal.addEventListener('abort', aborted, { once: true });
    if (signal.aborted) aborted();
  });
}

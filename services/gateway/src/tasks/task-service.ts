/**
 * The business handlers of `sluice.v1.TaskService`. Every call authenticates first (the tenant
 * comes from the API key, never from the request); a task of another tenant is `NOT_FOUND`, as a
 * missing one. Reads come from Postgres; the gateway keeps no task state in memory.
 */
import type { Metadata, ServerWritableStream } from '@grpc/grpc-js';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  decidedAdmission,
  encodeMessage,
  wakeDispatcherForEach,
  type WakeStep,
  listsPriority,
  type BusCatalog,
  type DecisionView,
  type GuardCapsView,
} from '@sluice/bus';
import {
  SluiceErrorCode,
  isFinalStatus,
  isSluiceError,
  isTaskStatus,
  taskTypeProblem,
  type Priority,
} from '@sluice/core';
import {
  findKeyOwners,
  findLatestTaskTypes,
  GroupReader,
  StaleReads,
  firstStepOf,
  findTask,
  isUuid,
  listTaskEvents,
  listTasks,
  nextAttemptAt,
  queueStanding,
  withDatabaseSpan,
  type AdmissionSettings,
  type ClaimedStep,
  type Database,
  type KeyOwner,
  type RegisteredTaskType,
  type RememberedReads,
  type SubmitTaskResult,
  type TaskRecord,
  type TaskTypeManifest,
  type UrgentClaim,
} from '@sluice/db';
import type { Tracer } from '@opentelemetry/api';
import {
  ATTR_CREATE_GROUP_SIZE,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_FROM,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_TASK_TRANSITION,
  activeSpan,
  traceparentOfActiveSpan,
  withContinuedSpan,
  withSpan,
  type Logger,
  type Metrics,
} from '@sluice/telemetry';
import {
  alreadyExists,
  failedPrecondition,
  invalidArgument,
  notFound,
  readBearerKey,
  resourceExhausted,
  unauthenticated,
  type TaskServiceHandlers,
} from '../grpc/index.js';
import {
  fromTimestamp,
  type CreateTaskRequest,
  type CreateTaskResponse,
  type Timestamp,
  type WatchTaskRequest,
  type WatchTaskResponse,
} from '@sluice/api';
import type { FaultInjection } from '../fault-injection.js';
import type { EventHub } from './event-hub.js';
import { waitingReason } from './waiting-reason.js';
import { InputValidators } from './input-validation.js';
import { MAX_BATCH_TASKS, checkBatch, submitBatch } from './create-batch.js';
import {
  checkCreateRequest,
  type CheckedCreate,
  createSpanAttributes,
  createSummary,
  lookUpTypes,
  newTaskOf,
  recordCreated,
} from './create-request.js';
import {
  cancelTask,
  decideApproval,
  pauseTask,
  resumeTask,
  retryTask,
  type LifecycleResult,
} from './lifecycle.js';
import {
  eventToApi,
  priorityFromApi,
  statusFromApi,
  taskToApi,
  tombstoneToApi,
} from './mapping.js';
import { decodePageToken, encodePageToken } from './page-token.js';
import { dispatchUrgentSteps } from './urgent-dispatch.js';
import { CreateGroups } from './create-groups.js';
import { RememberedReadsCache } from './remembered-reads.js';

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

/** Longest accepted approval comment. */
export const MAX_COMMENT_LENGTH = 4_000;

/** Page size of `ListTasks` when the caller gives none, and the most it may ask for. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;

export function createTaskService(deps: TaskServiceDeps): Partial<TaskServiceHandlers> {
  const validators = new InputValidators();
  const checks = { validators, maxInputBytes: deps.maxInputBytes };
  /**
   * Sheds before anything is written: a rejected create leaves nothing behind, and the same call
   * (same idempotency keys) after the delay creates each task once. A batch is refused as a whole
   * when the governor rejects any of its priorities.
   */
  const refuseWhenShedding = (priorities: readonly Priority[]): void => {
    const { decision, rejected } = shedding(priorities);
    const first = rejected[0];
    if (!decision || first === undefined) return;
    for (const priority of rejected) {
      deps.metrics.admissionRejections.inc({ priority: `P${priority}` });
    }
    throw resourceExhausted(
      `Sluice is shedding P${first} work under load (${decision.reasons[0] ?? decision.level}); retry later`,
      decision.retry_after_ms || 1_000,
    );
  };
  /** Which of `priorities` the governor's decision rejects now. */
  const shedding = (priorities: readonly Priority[]) => {
    const decision = deps.decisions?.current();
    const rejected = decision ? priorities.filter((p) => listsPriority(decision.reject, p)) : [];
    return { decision, rejected };
  };
  /**
   * How a create of these priorities claims its P0 steps: not at all without P0 work, without the
   * urgent claim, or while the governor holds P0 (the claim could admit nothing).
   */
  const urgentClaimFor = (priorities: readonly Priority[]): UrgentClaim | undefined => {
    if (!deps.urgentClaim || !priorities.includes(0)) return undefined;
    const decision = deps.decisions?.current();
    if (decision === undefined) return { admission: deps.urgentClaim.admission };
    const decided = decidedAdmission(decision);
    if (decided.heldPriorities.includes(0)) return undefined;
    return { admission: { ...deps.urgentClaim.admission, ...decided } };
  };
  /**
   * Publishes the P0 steps a create claimed (after its commit, before its answer). The tasks exist
   * whatever happens here, so the create succeeds: a step whose publication or bookkeeping failed
   * is the reconciler's, as a scheduler's claim would be.
   */
  const dispatchClaimed = async (claimed: readonly ClaimedStep[]): Promise<void> => {
    if (!deps.urgentClaim || claimed.length === 0) return;
    try {
      await dispatchUrgentSteps({ ...deps, js: deps.urgentClaim.js }, claimed);
    } catch (error) {
      deps.log.warn(
        { err: error, steps: claimed.length },
        'urgent dispatch failed after the create committed; the reconciler re-dispatches',
      );
    }
  };
  /**
   * Every call's API key, and every create's task type, read with those of the calls that arrive
   * during the read before (group-reader.ts): one statement for many calls under load, and each
   * read started after its call arrived, so a key revoked before the call is refused. (A create of
   * a key and type read before skips both and has its insert confirm them instead, see
   * {@link createOnRememberedReads}.)
   */
  const keyOwners = new GroupReader((keys) => findKeyOwners(deps.db, keys));
  /** What those reads found last, for creates written without reading again (see there). */
  const remembered = new RememberedReadsCache();
  const latestTypes = new GroupReader((names) => findLatestTaskTypes(deps.db, names));
  /** Concurrent `CreateTask`s of a tenant, written together. */
  const createGroups = new CreateGroups({
    db: deps.db,
    urgentClaimFor,
    afterCommit: async (claimed) => {
      deps.faultInjection?.afterCreateCommit();
      await dispatchClaimed(claimed);
    },
  });
  /**
   * Counts, logs and announces created tasks: one wake-up per first step's resource and priority,
   * and one per resource for the P0 steps the create dispatched itself (`claimed`), which need no
   * admission pass but tell the scheduler's urgent-wait guard that P0 work is about.
   */
  const announceCreated = (
    created: readonly { task: TaskRecord; taskType: TaskTypeManifest }[],
    claimed: readonly ClaimedStep[],
  ): void => {
    const dispatched = new Set(claimed.map((step) => step.taskId));
    const wakes: WakeStep[] = [];
    for (const { task, taskType } of created) {
      const priority = task.priority as Priority;
      deps.metrics.tasksCreated.inc({ priority: `P${priority}` });
      deps.log.info(
        { task_id: task.id, tenant_id: task.tenantId, type: taskType.name, priority },
        'task created',
      );
      const resource = firstStepOf(taskType).resource;
      wakes.push(
        dispatched.has(task.id) ? { resource, priority, dispatched: true } : { resource, priority },
      );
    }
    // New ready steps are admission's business only (not the outcome or settle passes'); the
    // step's resource and priority let admission skip the look when that resource is full.
    wakeDispatcherForEach(deps.nc, deps.catalog, 'task.created', wakes);
  };
  /**
   * Starts reading the requests' task types while the caller's key is checked (two round trips at
   * once, not one after the other); their answers are looked at only once the caller is
   * authenticated. Nothing is read for a call without a key, or a batch over the limit.
   */
  const typesOf = (metadata: Metadata, requests: readonly CreateTaskRequest[]) =>
    readBearerKey(metadata) === undefined || requests.length > MAX_BATCH_TASKS
      ? new Map<string, Promise<RegisteredTaskType | undefined>>()
      : lookUpTypes((name) => latestTypes.read(name), requests);
  const authenticate = async (metadata: Metadata): Promise<KeyOwner> => {
    const key = readBearerKey(metadata);
    if (key === undefined) throw unauthenticated();
    const owner = await keyOwners.read(key);
    if (!owner) throw unauthenticated('the API key is not valid');
    remembered.learnKey(key, owner);
    return owner;
  };
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
        settle(await run(), taskId);
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

  /**
   * Writes one checked create in the `sluice.task.create` span that roots its task's trace, and
   * answers it. With `reads`, the create was checked against remembered reads and is written only
   * if they still hold.
   *
   * @throws StaleReads when `reads` no longer hold: nothing was written.
   */
  const writeCreate = async (
    tenantId: string,
    create: CheckedCreate,
    reads: RememberedReads | undefined,
  ): Promise<CreateTaskResponse> => {
    const attributes = createSpanAttributes(tenantId, create);
    const { result, claimed } = await withSpan(
      deps.tracer,
      'sluice.task.create',
      attributes,
      async (span) => {
        // The root span of the task's trace: stored on the task, continued by every later step.
        const task = newTaskOf(tenantId, create, traceparentOfActiveSpan());
        // The create's write (its group's transaction, see create-groups.ts), a database client
        // span under this one, from the call's turn to the commit.
        // (Named for what this create asks; its group may also read others' keys, or claim.)
        const urgent = urgentClaimFor([create.priority]) !== undefined;
        const grouped = await withDatabaseSpan(
          deps.db,
          {
            summary: createSummary(create.idempotencyKey !== '', urgent),
            resultAttributes: (written) => ({ [ATTR_CREATE_GROUP_SIZE]: written.groupSize }),
          },
          () => createGroups.write(task, reads),
        ).catch(asAlreadyExists);
        if (grouped.result.kind === 'created') recordCreated(span, grouped.result.task);
        return grouped;
      },
    );
    if (result.kind === 'created') {
      announceCreated([{ task: result.task, taskType: create.taskType }], claimed);
    }
    return createResponse(result);
  };
  /**
   * A `CreateTask` of a key and type this gateway read before: checked against what it remembers
   * of them and written on condition that they still hold, without reading them first (one round
   * trip less). `undefined` sends the call the way that reads them: when either is not remembered,
   * when a check would refuse the call (every refusal is answered from fresh reads, never from
   * remembered ones), when the create would claim its P0 step in its transaction, and when a
   * remembered read turned out to be stale (then forgotten). (A claiming create on remembered reads
   * would be safe — a stale read refuses its insert, which rolls its claim back with it — and took
   * ~1 ms off P0's idle pickup, but it lengthened the tail of P0's first second under a backlog:
   * p99 98–196 ms against 70–84 in four alternating pairs, session 36. Not kept.)
   */
  const createOnRememberedReads = async (
    metadata: Metadata,
    request: CreateTaskRequest,
  ): Promise<CreateTaskResponse | undefined> => {
    const key = readBearerKey(metadata);
    const known = key === undefined ? undefined : remembered.forCreate(key, request.type);
    if (!known) return undefined;
    let create: CheckedCreate;
    try {
      create = checkCreateRequest(request, known.taskType, { ...checks, prefix: '' });
    } catch {
      return undefined;
    }
    const refused = shedding([create.priority]).rejected.length > 0;
    if (refused || urgentClaimFor([create.priority]) !== undefined) return undefined;
    try {
      return await writeCreate(known.tenantId, create, known.reads);
    } catch (error) {
      if (!(error instanceof StaleReads)) throw error;
      remembered.forget(known);
      return undefined;
    }
  };

  return {
    async CreateTask(call) {
      const request = call.request;
      const onRemembered = await createOnRememberedReads(call.metadata, request);
      if (onRemembered !== undefined) return onRemembered;
      const types = typesOf(call.metadata, [request]);
      const { tenantId } = await authenticate(call.metadata);
      const taskType = await types.get(request.type);
      if (taskType) remembered.learnType(taskType);
      const create = checkCreateRequest(request, taskType, { ...checks, prefix: '' });
      refuseWhenShedding([create.priority]);
      return writeCreate(tenantId, create, undefined);
    },

    async CreateTasks(call) {
      const entries = call.request.tasks ?? [];
      const types = typesOf(call.metadata, entries);
      const { tenantId } = await authenticate(call.metadata);
      const batch = await checkBatch(entries, types, checks);
      refuseWhenShedding(batch.map((create) => create.priority));
      const urgent = urgentClaimFor(batch.map((create) => create.priority));
      const { results, claimed } = await submitBatch(deps, tenantId, batch, urgent).catch(
        asAlreadyExists,
      );
      deps.faultInjection?.afterCreateCommit();
      await dispatchClaimed(claimed);
      announceCreated(
        results.flatMap((result, index) =>
          result.kind === 'created'
            ? [{ task: result.task, taskType: batch[index]!.taskType }]
            : [],
        ),
        claimed,
      );
      return { results: results.map(createResponse) };
    },

    async GetTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      checkTaskId(call.request.task_id);
      return { task: await describe(tenantId, call.request.task_id) };
    },

    async ListTasks(call) {
      const { tenantId } = await authenticate(call.metadata);
      const request = call.request;
      if (request.page_size < 0 || request.page_size > MAX_PAGE_SIZE) {
        throw invalidArgument('page_size', `page_size must be between 0 and ${MAX_PAGE_SIZE}`);
      }
      const limit = request.page_size === 0 ? DEFAULT_PAGE_SIZE : request.page_size;
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
      const after = request.page_token === '' ? undefined : decodePageToken(request.page_token);
      if (after === null)
        throw invalidArgument('page_token', 'page_token is not one this API issued');
      const rows = await listTasks(deps.db, {
        tenantId,
        limit: limit + 1,
        ...(status && isTaskStatus(status) ? { status } : {}),
        ...(request.type === '' ? {} : { type: request.type }),
        ...(priority === undefined ? {} : { priority }),
        ...(createdAfter ? { createdAfter } : {}),
        ...(createdBefore ? { createdBefore } : {}),
        ...(after ? { after } : {}),
      });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        tasks: page.map((task) => taskToApi(task)),
        next_page_token: rows.length > limit && last ? encodePageToken(last) : '',
      };
    },

    async CancelTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      const { task_id: taskId, reason } = call.request;
      checkTaskId(taskId);
      // Not counted here: a cancel of a running task only requests it. sluice_cancellations_total
      // counts tasks that became cancelled, from their events (the scheduler's task-metrics.ts).
      return inTaskTrace(tenantId, taskId, 'cancel', () =>
        cancelTask(deps.db, { tenantId, taskId }, reason),
      );
    },

    async PauseTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'pause', () => pauseTask(deps.db, { tenantId, taskId }));
    },

    async ResumeTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'resume', () =>
        resumeTask(deps.db, { tenantId, taskId }),
      );
    },

    async RetryTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      const taskId = call.request.task_id;
      checkTaskId(taskId);
      return inTaskTrace(tenantId, taskId, 'retry', () => retryTask(deps.db, { tenantId, taskId }));
    },

    async ApproveTask(call) {
      const { tenantId } = await authenticate(call.metadata);
      const { task_id: taskId, approved, comment } = call.request;
      checkTaskId(taskId);
      if (comment.length > MAX_COMMENT_LENGTH) {
        throw invalidArgument(
          'comment',
          `comment must be at most ${MAX_COMMENT_LENGTH} characters`,
        );
      }
      return inTaskTrace(tenantId, taskId, approved ? 'approve' : 'reject', () =>
        decideApproval(deps.db, { tenantId, taskId }, { approved, comment }),
      );
    },

    async WatchTask(call, context) {
      const { tenantId } = await authenticate(call.metadata);
      const afterSeq = parseAfterSeq(call.request);
      const task = await requireTask(tenantId, call.request.task_id);
      await streamEvents(deps, call, task.id, afterSeq, context.signal);
    },
  };
}

/** A `SluiceError` `already_exists` (a key used for another request) as its gRPC error. */
function asAlreadyExists(error: unknown): never {
  if (isSluiceError(error, SluiceErrorCode.AlreadyExists)) throw alreadyExists(error.message);
  throw error;
}

/** The API's answer to one create: the task, or the tombstone of a deleted original. */
function createResponse(result: SubmitTaskResult): CreateTaskResponse {
  if (result.kind === 'deleted') {
    // A late repeat of a task retention has deleted: the original's id; nothing was created.
    return { task: tombstoneToApi(result.tombstone), created: false };
  }
  return { task: taskToApi(result.task), created: result.kind === 'created' };
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

/** A time filter of ListTasks, or `undefined` when unset. */
function timeFilter(value: Timestamp | null, field: string): Date | undefined {
  if (value === null) return undefined;
  try {
    return fromTimestamp(value);
  } catch {
    throw invalidArgument(field, `${field} is not a valid time`);
  }
}

function parseAfterSeq(request: WatchTaskRequest): number {
  const value = Number(request.after_seq === '' ? '0' : request.after_seq);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw invalidArgument('after_seq', 'after_seq must be a non-negative event sequence');
  }
  return value;
}

/**
 * Replays the task's events after `afterSeq` from Postgres, then follows new ones: each notice (or
 * a periodic re-check, in case a notice was lost) makes it read the events it has not sent yet,
 * in sequence. Ends after the event that takes the task to a final state.
 */
async function streamEvents(
  deps: TaskServiceDeps,
  call: ServerWritableStream<WatchTaskRequest, WatchTaskResponse>,
  taskId: string,
  afterSeq: number,
  signal: AbortSignal,
): Promise<void> {
  let lastSent = afterSeq;
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
        const events = await listTaskEvents(deps.db, taskId, lastSent);
        for (const event of events) {
          await write(call, { event: eventToApi(event) });
          lastSent = event.seq;
          const to = event.toStatus;
          if (to !== null && isTaskStatus(to) && isFinalStatus(to)) return;
        }
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

/** Writes one response, waiting for the stream to drain when its buffer is full. */
async function write(
  call: ServerWritableStream<WatchTaskRequest, WatchTaskResponse>,
  response: WatchTaskResponse,
): Promise<void> {
  if (!call.write(response)) await new Promise((resolve) => call.once('drain', resolve));
}

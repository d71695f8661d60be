/**
 * `CreateTask` and `CreateTasks`: a create is checked (the caller's key, the task type, the input,
 * the governor's shedding), written in its tenant's group of concurrent creates (create-groups.ts)
 * or as one batch (create-batch.ts), in the `sluice.task.create` span that roots the task's trace,
 * and announced to the scheduler. A create of P0 work may claim and publish its first steps itself
 * (the urgent claim, urgent-dispatch.ts).
 */
import type { Metadata } from '@grpc/grpc-js';
import { decidedAdmission, wakeDispatcherForEach, type WakeStep, listsPriority } from '@sluice/bus';
import { SluiceErrorCode, isSluiceError, type Priority } from '@sluice/core';
import {
  StaleReads,
  firstStepOf,
  withDatabaseSpan,
  type ClaimedStep,
  type RememberedReads,
  type SubmitTaskResult,
  type TaskRecord,
  type TaskTypeManifest,
  type UrgentClaim,
} from '@sluice/db';
import { ATTR_CREATE_GROUP_SIZE, traceparentOfActiveSpan, withSpan } from '@sluice/telemetry';
import type { CreateTaskRequest, CreateTaskResponse } from '@sluice/api';
import {
  alreadyExists,
  readBearerKey,
  resourceExhausted,
  type TaskServiceHandlers,
} from '../grpc/index.js';
import type { CallerReads } from './caller-reads.js';
import { checkBatch, submitBatch } from './create-batch.js';
import { CreateGroups } from './create-groups.js';
import {
  checkCreateRequest,
  type CheckedCreate,
  createSpanAttributes,
  createSummary,
  newTaskOf,
  recordCreated,
} from './create-request.js';
import { InputValidators } from './input-validation.js';
import { taskToApi, tombstoneToApi } from './mapping.js';
import type { TaskServiceDeps } from './task-service.js';
import { dispatchUrgentSteps } from './urgent-dispatch.js';

/** The create handlers, sharing `reads` (the caller's key and task types) with the others. */
export function createTaskCreation(
  deps: TaskServiceDeps,
  reads: CallerReads,
): Pick<TaskServiceHandlers, 'CreateTask' | 'CreateTasks'> {
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
   * Writes one checked create in the `sluice.task.create` span that roots its task's trace, and
   * answers it. With `rememberedReads`, the create was checked against remembered reads and is
   * written only if they still hold.
   *
   * @throws StaleReads when they no longer hold: nothing was written.
   */
  const writeCreate = async (
    tenantId: string,
    create: CheckedCreate,
    rememberedReads: RememberedReads | undefined,
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
          () => createGroups.write(task, rememberedReads),
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
    const known = key === undefined ? undefined : reads.remembered.forCreate(key, request.type);
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
      reads.remembered.forget(known);
      return undefined;
    }
  };

  return {
    async CreateTask(call) {
      const request = call.request;
      const onRemembered = await createOnRememberedReads(call.metadata, request);
      if (onRemembered !== undefined) return onRemembered;
      const types = reads.typesOf(call.metadata, [request]);
      const { tenantId } = await reads.authenticate(call.metadata);
      const taskType = await types.get(request.type);
      if (taskType) reads.remembered.learnType(taskType);
      const create = checkCreateRequest(request, taskType, { ...checks, prefix: '' });
      refuseWhenShedding([create.priority]);
      return writeCreate(tenantId, create, undefined);
    },

    async CreateTasks(call) {
      const entries = call.request.tasks ?? [];
      const types = reads.typesOf(call.metadata, entries);
      const { tenantId } = await reads.authenticate(call.metadata);
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

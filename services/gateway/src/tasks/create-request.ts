/**
 * One create request — a `CreateTask`, or an entry of `CreateTasks` — from its checks to what is
 * written and traced. The checks run once the caller is authenticated and the task type looked
 * up; what is wrong answers `INVALID_ARGUMENT` naming the field (under the entry's prefix in a
 * batch, e.g. `tasks[3].input.url`).
 */
import type { Attributes, Span } from '@opentelemetry/api';
import type { CreateTaskRequest } from '@sluice/api';
import { taskTypeProblem, type Json, type Priority } from '@sluice/core';
import { type NewTask, type TaskRecord, type TaskTypeManifest } from '@sluice/db';
import {
  ATTR_PRIORITY,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_TASK_TRANSITION,
  traceIdOf,
} from '@sluice/telemetry';
import { invalidArgument, isGrpcError } from '../grpc/index.js';
import { parseInput, type InputValidators } from './input-validation.js';
import { priorityFromApi } from './mapping.js';

/** Longest accepted idempotency key, in characters (code points). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 256;

/** A create request that passed every check. */
export interface CheckedCreate {
  readonly taskType: TaskTypeManifest;
  readonly priority: Priority;
  readonly input: Json;
  /** `''` when the caller gave none. */
  readonly idempotencyKey: string;
}

/** What the checks need besides the request. */
export interface CreateCheckContext {
  readonly validators: InputValidators;
  readonly maxInputBytes: number;
  /** Put before every field an error names; `''` for `CreateTask`. */
  readonly prefix: string;
}

/**
 * Checks `request` in the order a caller fixes its mistakes: the type's name, the priority, the
 * key, the input as JSON, then whether the type exists and the input matches its schema.
 *
 * @param taskType the latest version of the requested type, `undefined` when there is none.
 * @throws GrpcError `INVALID_ARGUMENT` for the first problem found.
 */
export function checkCreateRequest(
  request: CreateTaskRequest,
  taskType: TaskTypeManifest | undefined,
  context: CreateCheckContext,
): CheckedCreate {
  const { prefix } = context;
  const typeProblem = taskTypeProblem(request.type);
  if (typeProblem) throw invalidArgument(`${prefix}type`, typeProblem);
  const priority = priorityFromApi(request.priority);
  if (priority === undefined) {
    throw invalidArgument(`${prefix}priority`, 'priority must be one of PRIORITY_P0 … PRIORITY_P3');
  }
  const key = request.idempotency_key;
  if (isLongerThanKeyAllows(key) || /[\p{Cc}]/u.test(key)) {
    throw invalidArgument(
      `${prefix}idempotency_key`,
      `idempotency_key must be at most ${MAX_IDEMPOTENCY_KEY_LENGTH} printable characters`,
    );
  }
  const input = parseInput(request.input, context.maxInputBytes, prefix);
  if (isGrpcError(input)) throw input;
  if (!taskType) throw invalidArgument(`${prefix}type`, `unknown task type "${request.type}"`);
  const inputError = context.validators.check(taskType, input, prefix);
  if (inputError) throw inputError;
  return { taskType, priority, input, idempotencyKey: key };
}

/**
 * Whether `key` has more characters (code points) than a key may, as the refusal says and as a
 * cancel's reason counts: `length` counts an emoji twice. (Postgres's `text` column, and the
 * unique index over it, hold 256 characters of 4 UTF-8 bytes with room to spare.)
 */
function isLongerThanKeyAllows(key: string): boolean {
  return key.length > MAX_IDEMPOTENCY_KEY_LENGTH && [...key].length > MAX_IDEMPOTENCY_KEY_LENGTH;
}

/**
 * Starts looking up the latest version of every valid type the requests name, by name, with
 * `latestType`, while the caller's key is checked. Invalid names are left to the checks.
 */
export function lookUpTypes<Type extends TaskTypeManifest>(
  latestType: (name: string) => Promise<Type | undefined>,
  entries: readonly CreateTaskRequest[],
): Map<string, Promise<Type | undefined>> {
  const lookups = new Map<string, Promise<Type | undefined>>();
  for (const { type } of entries) {
    if (lookups.has(type) || taskTypeProblem(type)) continue;
    const lookup = latestType(type);
    lookup.catch(() => undefined); // an unauthenticated call never awaits it
    lookups.set(type, lookup);
  }
  return lookups;
}

/** The task `create` asks for, as the database writes it, in the trace `traceParent` names. */
export function newTaskOf(
  tenantId: string,
  create: CheckedCreate,
  traceParent: string | undefined,
): NewTask {
  return {
    tenantId,
    taskType: create.taskType,
    priority: create.priority,
    input: create.input,
    ...(create.idempotencyKey === '' ? {} : { idempotencyKey: create.idempotencyKey }),
    ...(traceParent ? { traceParent, traceId: traceIdOf(traceParent) } : {}),
  };
}

/** The attributes of a `sluice.task.create` span, set at its start so samplers see them. */
export function createSpanAttributes(tenantId: string, create: CheckedCreate): Attributes {
  return {
    [ATTR_TENANT]: tenantId,
    [ATTR_TASK_TYPE]: create.taskType.name,
    [ATTR_PRIORITY]: `P${create.priority}`,
  };
}

/** On a created task's `sluice.task.create` span: the first state change of its history. */
export function recordCreated(span: Span, task: TaskRecord): void {
  span.setAttribute(ATTR_TASK_ID, task.id);
  span.addEvent(EVENT_TASK_TRANSITION, {
    [ATTR_TASK_EVENT]: 'create',
    [ATTR_TASK_STATUS_TO]: task.status,
  });
}

/**
 * `db.query.summary` of a create's database span: the one statement that writes the tasks, with
 * idempotency keys the tombstone read after it, and with the urgent claim the claim of P0 steps.
 */
export function createSummary(withKeys: boolean, claimsUrgent = false): string {
  const insert = 'INSERT tasks INSERT task_events INSERT task_event_outbox INSERT task_steps';
  const keyed = withKeys ? `${insert} SELECT idempotency_tombstones` : insert;
  return claimsUrgent ? `${keyed} SELECT task_steps UPDATE task_steps` : keyed;
}

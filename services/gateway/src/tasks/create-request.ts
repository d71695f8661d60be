/**
 * The checks of one create request — a `CreateTask`, or an entry of `CreateTasks` — once the caller
 * is authenticated and the task type looked up. What is wrong answers `INVALID_ARGUMENT` naming
 * the field (under the entry's prefix in a batch, e.g. `tasks[3].input.url`).
 */
import type { CreateTaskRequest } from '@sluice/api';
import { taskTypeProblem, type Json, type Priority } from '@sluice/core';
import type { TaskTypeManifest } from '@sluice/db';
import { invalidArgument, isGrpcError } from '../grpc/index.js';
import { parseInput, type InputValidators } from './input-validation.js';
import { priorityFromApi } from './mapping.js';

/** Longest accepted idempotency key. */
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
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH || /[\p{Cc}]/u.test(key)) {
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

/**
 * The parts of `CreateTasks` that differ from `CreateTask`: the batch's own checks (its size, each
 * entry's, keys repeated inside it), one root span per task, and one transaction for all.
 */
import type { CreateTaskRequest } from '@sluice/api';
import {
  submitTasksClaiming,
  withDatabaseSpan,
  type Database,
  type SubmittedTasks,
  type TaskTypeManifest,
  type UrgentClaim,
} from '@sluice/db';
import { SpanStatusCode, type Span, type Tracer } from '@opentelemetry/api';
import { activeSpan, traceparentOf } from '@sluice/telemetry';
import { invalidArgument } from '../grpc/index.js';
import {
  checkCreateRequest,
  createSpanAttributes,
  createSummary,
  newTaskOf,
  recordCreated,
  type CheckedCreate,
  type CreateCheckContext,
} from './create-request.js';

/** Most entries of one `CreateTasks` call. */
export const MAX_BATCH_TASKS = 500;

/**
 * Checks the batch and each entry as `CreateTask` would (fields named `tasks[i].…`), and that no
 * key repeats inside the batch (which of two entries would win is not the caller's to guess).
 *
 * @throws GrpcError `INVALID_ARGUMENT` for the first problem found.
 */
export async function checkBatch(
  entries: readonly CreateTaskRequest[],
  types: ReadonlyMap<string, Promise<TaskTypeManifest | undefined>>,
  context: Omit<CreateCheckContext, 'prefix'>,
): Promise<CheckedCreate[]> {
  if (entries.length === 0) throw invalidArgument('tasks', 'tasks must hold at least one task');
  if (entries.length > MAX_BATCH_TASKS) {
    throw invalidArgument(
      'tasks',
      `tasks holds ${entries.length} tasks; at most ${MAX_BATCH_TASKS} are accepted per call`,
    );
  }
  const checked: CheckedCreate[] = [];
  const firstOfKey = new Map<string, number>();
  for (const [index, entry] of entries.entries()) {
    const prefix = `tasks[${index}].`;
    const taskType = await types.get(entry.type);
    const create = checkCreateRequest(entry, taskType, { ...context, prefix });
    const key = create.idempotencyKey;
    const earlier = firstOfKey.get(key);
    if (key !== '' && earlier !== undefined) {
      throw invalidArgument(
        `${prefix}idempotency_key`,
        `idempotency_key "${key}" is also the key of tasks[${earlier}]; each task of a batch needs its own`,
      );
    }
    firstOfKey.set(key, index);
    checked.push(create);
  }
  return checked;
}

/** What {@link submitBatch} needs. */
export interface SubmitBatchDeps {
  readonly db: Database;
  /** Opens each task's root span, whose trace the task keeps. */
  readonly tracer: Tracer;
}

/**
 * Writes the batch in one transaction, each task with a root span of its own (`sluice.task.create`,
 * linked to the span of the call, which is in the caller's trace): a task's trace holds that task
 * only, as when it is created alone without a caller's trace. With `urgent`, the transaction also
 * claims the batch's P0 steps (the caller publishes them).
 */
export async function submitBatch(
  deps: SubmitBatchDeps,
  tenantId: string,
  batch: readonly CheckedCreate[],
  urgent: UrgentClaim | undefined,
): Promise<SubmittedTasks> {
  const call = activeSpan()?.spanContext();
  const spans = batch.map((create) =>
    deps.tracer.startSpan('sluice.task.create', {
      root: true,
      attributes: createSpanAttributes(tenantId, create),
      ...(call ? { links: [{ context: call }] } : {}),
    }),
  );
  const withKeys = batch.some((create) => create.idempotencyKey !== '');
  const summary = createSummary(withKeys, urgent !== undefined);
  try {
    const submitted = await withDatabaseSpan(deps.db, { summary }, () =>
      submitTasksClaiming(
        deps.db,
        batch.map((create, index) =>
          newTaskOf(tenantId, create, traceparentOf(spans[index] as Span)),
        ),
        urgent,
      ),
    );
    for (const [index, result] of submitted.results.entries()) {
      const span = spans[index];
      if (span && result.kind === 'created') recordCreated(span, result.task);
    }
    return submitted;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    for (const span of spans) span.setStatus({ code: SpanStatusCode.ERROR, message });
    throw error;
  } finally {
    for (const span of spans) span.end();
  }
}

/**
 * A typed client of `sluice.v1.TaskService` for TypeScript callers (services, the CLI, the demo,
 * tests). Requests and responses are the API's wire shapes from `@sluice/api`; failures are
 * grpc-js `ServiceError`s whose `code` is the gRPC status and whose `details` is the server's
 * message.
 */
import type * as grpc from '@grpc/grpc-js';
import {
  TASK_SERVICE_PROTO,
  type ApproveTaskResponse,
  type CancelTaskResponse,
  type CreateTaskResponse,
  type CreateTasksResponse,
  type GetTaskResponse,
  type ListTasksRequest,
  type ListTasksResponse,
  type PauseTaskResponse,
  type Priority,
  type ResumeTaskResponse,
  type RetryTaskResponse,
  type TaskEvent,
} from '@sluice/api';
import { toJson } from '../json.js';
import { connect, type ClientOptions } from './connection.js';

/** Where the gateway is and which tenant calls (the tenant is the API key's). */
export type TaskClientOptions = ClientOptions;

/** What `createTask` takes: the input as a value (sent as JSON) or as JSON text. */
export interface CreateTaskParams {
  readonly type: string;
  readonly priority: Priority;
  /**
   * A string is sent as it is (JSON text, validated by the gateway); anything else as JSON, as
   * JSON.stringify writes it (a `Date` as its ISO string). A value JSON would change (`NaN`,
   * `Infinity`, an `undefined` array item or input, a `Map`, a class instance) rejects the call
   * with a `TypeError` naming where it is. What JSON carries as given is the gateway's to judge.
   */
  readonly input: unknown;
  /** Not empty: leave it out for a create without a key (an empty one rejects the call). */
  readonly idempotencyKey?: string;
}

/** A person's decision on a task waiting for approval. */
export interface ApprovalDecision {
  /** `true` continues the task; `false` rejects it, which cancels it. */
  readonly approved: boolean;
  /** Recorded with the decision; the reason of a rejection. */
  readonly comment?: string;
}

/** The typed client. Every method rejects with the grpc-js `ServiceError` of a refused call. */
export interface TaskClient {
  createTask(params: CreateTaskParams): Promise<CreateTaskResponse>;
  /**
   * Creates up to 500 tasks in one call, all or none (one transaction): one result per task, in
   * the order given. Far cheaper per task than `createTask` for batch ingestion.
   */
  createTasks(tasks: readonly CreateTaskParams[]): Promise<CreateTaskResponse[]>;
  getTask(taskId: string): Promise<GetTaskResponse>;
  listTasks(request?: Partial<ListTasksRequest>): Promise<ListTasksResponse>;
  /** Cancels at once, or requests the cancel of a running task (`cancel_requested`). */
  cancelTask(taskId: string, reason?: string): Promise<CancelTaskResponse>;
  /** Approves or rejects a task in `TASK_STATUS_WAITING_APPROVAL`. */
  approveTask(taskId: string, decision: ApprovalDecision): Promise<ApproveTaskResponse>;
  /** Pauses at once, or requests the pause of a running task (`pause_requested`). */
  pauseTask(taskId: string): Promise<PauseTaskResponse>;
  /** Resumes a paused task. */
  resumeTask(taskId: string): Promise<ResumeTaskResponse>;
  /** Starts a new attempt of a failed (terminal) or cancelled task. */
  retryTask(taskId: string): Promise<RetryTaskResponse>;
  /**
   * The task's events after `afterSeq` (replayed), then live ones, until the task reaches a final
   * state (the stream then ends) or `signal` aborts (the iteration then ends quietly, yielding
   * none of the events already received). An `afterSeq` that is not an integer ≥ 0 rejects the
   * iteration with a `RangeError`.
   */
  watchTask(taskId: string, afterSeq?: number, signal?: AbortSignal): AsyncIterable<TaskEvent>;
  /** Closes the connection; a watch still open ends with a `CANCELLED` `ServiceError`. */
  close(): void;
}

/** Creates a client; it connects lazily, on the first call. */
export function createTaskClient(options: TaskClientOptions): TaskClient {
  const connection = connect(TASK_SERVICE_PROTO, 'sluice.v1.TaskService', options);
  const { unary } = connection;
  const stub = connection.stub as typeof connection.stub & {
    WatchTask(request: unknown, metadata: grpc.Metadata): grpc.ClientReadableStream<unknown>;
  };
  // Closing the channel lets calls in progress go on, and a watch of a running task would never
  // end (nor let the process exit): close() cancels the watches still open.
  const openWatches = new Set<grpc.ClientReadableStream<unknown>>();

  return {
    // Async: an input JSON cannot carry (a bigint, a cycle) rejects like a refused call would.
    createTask: async (params) => unary('CreateTask', createRequestOf(params, '')),
    createTasks: async (tasks) => {
      const response = await unary<CreateTasksResponse>('CreateTasks', {
        tasks: tasks.map((params, index) => createRequestOf(params, `tasks[${index}].`)),
      });
      return response.results;
    },
    getTask: (taskId) => unary('GetTask', { task_id: taskId }),
    listTasks: (request = {}) => unary('ListTasks', request),
    cancelTask: (taskId, reason = '') => unary('CancelTask', { task_id: taskId, reason }),
    approveTask: (taskId, decision) =>
      unary('ApproveTask', {
        task_id: taskId,
        approved: decision.approved,
        comment: decision.comment ?? '',
      }),
    pauseTask: (taskId) => unary('PauseTask', { task_id: taskId }),
    resumeTask: (taskId) => unary('ResumeTask', { task_id: taskId }),
    retryTask: (taskId) => unary('RetryTask', { task_id: taskId }),
    watchTask: (taskId, afterSeq = 0, signal) => ({
      async *[Symbol.asyncIterator]() {
        // The wire's uint64 would take 1.5 as 1, NaN as 0 (the whole history again) and -1 as
        // 2^64 - 1, none of them the position the caller meant.
        if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) {
          throw new RangeError(
            `afterSeq must be an event sequence (an integer ≥ 0), not ${afterSeq}`,
          );
        }
        if (signal?.aborted) return;
        const stream = stub.WatchTask(
          { task_id: taskId, after_seq: String(afterSeq) },
          connection.metadata(),
        );
        openWatches.add(stream);
        const abort = () => stream.cancel();
        signal?.addEventListener('abort', abort);
        try {
          for await (const response of stream) {
            // Events that arrived before the abort wait in the stream's buffer: none is handed
            // out once the caller has stopped the watch.
            if (signal?.aborted) return;
            yield (response as { event: TaskEvent }).event;
          }
        } catch (error) {
          // Our own abort ends the iteration quietly; anything else is the caller's to see.
          if (!signal?.aborted) throw error;
        } finally {
          signal?.removeEventListener('abort', abort);
          openWatches.delete(stream);
          stream.cancel();
        }
      },
    }),
    close: () => {
      for (const stream of openWatches) stream.cancel();
      connection.close();
    },
  };
}

/**
 * The wire form of a create.
 *
 * @param prefix put before the field a refusal names, e.g. `tasks[3].` for an entry of a batch.
 * @throws TypeError for an input JSON cannot carry as it is, naming where.
 */
function createRequestOf(params: CreateTaskParams, prefix: string) {
  return {
    type: params.type,
    priority: params.priority,
    input: inputTextOf(params.input, `${prefix}input`),
    idempotency_key: idempotencyKeyOf(params.idempotencyKey, `${prefix}idempotencyKey`),
  };
}

/**
 * The wire form of an idempotency key: `''`, the API's "no key", when there is none. An empty key
 * given is refused: `idempotencyKey: process.env.KEY ?? ''` with KEY unset asks for a repeat-safe
 * create, and sent as "no key" it would create the task again on every retry (as the CLI refuses
 * `--idempotency-key=`).
 */
function idempotencyKeyOf(key: string | undefined, field: string): string {
  if (key === '') throw new TypeError(`${field} must not be empty; leave it out for no key`);
  return key ?? '';
}

/**
 * `input` as the JSON text to send. JSON.stringify would change what it cannot carry without a
 * word (`NaN` and `Infinity` become `null`, an `undefined` array item `null`, a `Map` `{}`, an
 * `undefined` input no text at all), and the task would run with an input its caller never gave:
 * such an input is refused instead, naming where the value is. A value with a `toJSON` method (a
 * `Date`) is sent as what the method returns, as JSON.stringify sends it.
 */
function inputTextOf(input: unknown, field: string): string {
  if (typeof input === 'string') return input;
  if (input === undefined) throw new TypeError(`${field} is undefined; give a JSON value`);
  const checked = toJson(input, { taskInput: true });
  if (!checked.ok) throw new TypeError(`${field}: ${checked.problem}`);
  return JSON.stringify(checked.value);
}

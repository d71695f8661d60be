/**
 * A typed client of `sluice.v1.TaskService` for TypeScript callers (services, the demo, tests).
 * Requests and responses are the API's wire shapes from `@sluice/api`; failures are grpc-js
 * `ServiceError`s whose `code` is the gRPC status.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  PROTO_LOADER_OPTIONS,
  PROTO_ROOT,
  TASK_SERVICE_PROTO,
  type CancelTaskResponse,
  type CreateTaskResponse,
  type GetTaskResponse,
  type ListTasksRequest,
  type ListTasksResponse,
  type Priority,
  type TaskEvent,
} from '@sluice/api';

/** Where the gateway is and who calls. */
export interface TaskClientOptions {
  /** `host:port` of the gateway, e.g. `127.0.0.1:50051`. */
  readonly address: string;
  /** The tenant's API key, sent as `authorization: Bearer <key>`. */
  readonly apiKey: string;
  /** Transport security (default: plaintext, for loopback and private networks). */
  readonly credentials?: grpc.ChannelCredentials;
  /** Deadline of each unary call in milliseconds (default 30 s). */
  readonly timeoutMs?: number;
}

/** What `createTask` takes: the input as a value (sent as JSON) or as JSON text. */
export interface CreateTaskParams {
  readonly type: string;
  readonly priority: Priority;
  readonly input: unknown;
  readonly idempotencyKey?: string;
}

/** The typed client. */
export interface TaskClient {
  createTask(params: CreateTaskParams): Promise<CreateTaskResponse>;
  getTask(taskId: string): Promise<GetTaskResponse>;
  listTasks(request?: Partial<ListTasksRequest>): Promise<ListTasksResponse>;
  cancelTask(taskId: string, reason?: string): Promise<CancelTaskResponse>;
  /**
   * The task's events after `afterSeq` (replayed), then live ones, until the task reaches a final
   * state (the stream then ends) or `signal` aborts.
   */
  watchTask(taskId: string, afterSeq?: number, signal?: AbortSignal): AsyncIterable<TaskEvent>;
  close(): void;
}

type UnaryCall = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => void;

type TaskServiceStub = grpc.Client &
  Record<string, UnaryCall> & {
    WatchTask(request: unknown, metadata: grpc.Metadata): grpc.ClientReadableStream<unknown>;
  };

let serviceConstructor: grpc.ServiceClientConstructor | undefined;

function taskServiceConstructor(): grpc.ServiceClientConstructor {
  if (!serviceConstructor) {
    const definition = protoLoader.loadSync(TASK_SERVICE_PROTO, {
      ...PROTO_LOADER_OPTIONS,
      includeDirs: [PROTO_ROOT],
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as {
      sluice: { v1: { TaskService: grpc.ServiceClientConstructor } };
    };
    serviceConstructor = loaded.sluice.v1.TaskService;
  }
  return serviceConstructor;
}

/** Creates a client; it connects lazily, on the first call. */
export function createTaskClient(options: TaskClientOptions): TaskClient {
  const Service = taskServiceConstructor();
  const stub = new Service(
    options.address,
    options.credentials ?? grpc.credentials.createInsecure(),
  ) as unknown as TaskServiceStub;
  const metadata = () => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${options.apiKey}`);
    return md;
  };
  const unary = <Res>(method: string, request: unknown): Promise<Res> =>
    new Promise((resolve, reject) => {
      const call = stub[method];
      if (!call) return reject(new Error(`no method ${method}`));
      call.call(
        stub,
        request,
        metadata(),
        { deadline: Date.now() + (options.timeoutMs ?? 30_000) },
        (error, response) => (error ? reject(error) : resolve(response as Res)),
      );
    });

  return {
    createTask: (params) =>
      unary('CreateTask', {
        type: params.type,
        priority: params.priority,
        input: typeof params.input === 'string' ? params.input : JSON.stringify(params.input),
        idempotency_key: params.idempotencyKey ?? '',
      }),
    getTask: (taskId) => unary('GetTask', { task_id: taskId }),
    listTasks: (request = {}) => unary('ListTasks', request),
    cancelTask: (taskId, reason = '') => unary('CancelTask', { task_id: taskId, reason }),
    watchTask: (taskId, afterSeq = 0, signal) => ({
      async *[Symbol.asyncIterator]() {
        const stream = stub.WatchTask({ task_id: taskId, after_seq: String(afterSeq) }, metadata());
        const abort = () => stream.cancel();
        signal?.addEventListener('abort', abort);
        try {
          for await (const response of stream) {
            yield (response as { event: TaskEvent }).event;
          }
        } catch (error) {
          // Our own abort ends the iteration quietly; anything else is the caller's to see.
          if (!signal?.aborted) throw error;
        } finally {
          signal?.removeEventListener('abort', abort);
          stream.cancel();
        }
      },
    }),
    close: () => stub.close(),
  };
}

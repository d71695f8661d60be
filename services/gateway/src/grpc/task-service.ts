/**
 * The contract between `sluice.v1.TaskService` and the handlers that implement it.
 */
import type {
  ApproveTaskRequest,
  ApproveTaskResponse,
  CancelTaskRequest,
  CancelTaskResponse,
  CreateTaskRequest,
  CreateTaskResponse,
  CreateTasksRequest,
  CreateTasksResponse,
  GetTaskRequest,
  GetTaskResponse,
  ListTasksRequest,
  ListTasksResponse,
  PauseTaskRequest,
  PauseTaskResponse,
  ResumeTaskRequest,
  ResumeTaskResponse,
  RetryTaskRequest,
  RetryTaskResponse,
  WatchTaskRequest,
  WatchTaskResponse,
} from '@sluice/api';
import type { ServerStreamingMethod, UnaryMethod } from './handler-adapter.js';

/** The fully-qualified name of the task service. */
export const TASK_SERVICE_NAME = 'sluice.v1.TaskService';

/**
 * The handlers of `sluice.v1.TaskService`, keyed by RPC name. Each receives the grpc-js call
 * (`call.request`, `call.metadata` for the API key) and a `CallContext` with an abort signal,
 * and resolves with the response or rejects with a `GrpcError` from `status.ts`.
 */
export interface TaskServiceHandlers {
  CreateTask: UnaryMethod<CreateTaskRequest, CreateTaskResponse>;
  CreateTasks: UnaryMethod<CreateTasksRequest, CreateTasksResponse>;
  GetTask: UnaryMethod<GetTaskRequest, GetTaskResponse>;
  WatchTask: ServerStreamingMethod<WatchTaskRequest, WatchTaskResponse>;
  ListTasks: UnaryMethod<ListTasksRequest, ListTasksResponse>;
  CancelTask: UnaryMethod<CancelTaskRequest, CancelTaskResponse>;
  ApproveTask: UnaryMethod<ApproveTaskRequest, ApproveTaskResponse>;
  PauseTask: UnaryMethod<PauseTaskRequest, PauseTaskResponse>;
  ResumeTask: UnaryMethod<ResumeTaskRequest, ResumeTaskResponse>;
  RetryTask: UnaryMethod<RetryTaskRequest, RetryTaskResponse>;
}

/** The name of a `TaskService` RPC. */
export type TaskServiceMethodName = keyof TaskServiceHandlers;

/** How each RPC streams; checked against the compiled descriptors when the API is loaded. */
export const TASK_SERVICE_METHOD_KINDS = {
  CreateTask: 'unary',
  CreateTasks: 'unary',
  GetTask: 'unary',
  WatchTask: 'server_streaming',
  ListTasks: 'unary',
  CancelTask: 'unary',
  ApproveTask: 'unary',
  PauseTask: 'unary',
  ResumeTask: 'unary',
  RetryTask: 'unary',
} as const satisfies Record<TaskServiceMethodName, 'unary' | 'server_streaming'>;

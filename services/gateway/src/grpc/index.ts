/**
 * The gateway's gRPC plumbing: the server, the API's TypeScript shapes, status helpers and
 * credentials parsing. Business handlers live outside this folder and plug in through
 * {@link TaskServiceHandlers}.
 *
 * @example
 * ```ts
 * import { toTimestamp } from '@sluice/api';
 * import { createGrpcServer, invalidArgument, readBearerKey } from './grpc/index.js';
 *
 * const grpcServer = createGrpcServer({
 *   logger,
 *   port: 50051,
 *   taskService: {
 *     async GetTask(call) {
 *       const key = readBearerKey(call.metadata);
 *       if (key === undefined) throw unauthenticated();
 *       if (call.request.task_id === '') throw invalidArgument('task_id', 'is required');
 *       return { task: await tasks.get(key, call.request.task_id) };
 *     },
 *   },
 * });
 * const port = await grpcServer.start();
 * // ...
 * await grpcServer.stop(10_000);
 * ```
 */
export { AUTHORIZATION_METADATA_KEY, MAX_API_KEY_LENGTH, readBearerKey } from './auth.js';
export {
  DEFAULT_DESCRIPTOR_SET_PATH,
  DESCRIPTOR_SET_BUILD_COMMAND,
  DescriptorSetError,
} from './descriptor-set.js';
export type {
  CallContext,
  FinishedCall,
  ServerStreamingMethod,
  UnaryMethod,
} from './handler-adapter.js';
export {
  DEFAULT_GRPC_HOST,
  GRPC_KEEPALIVE_TIMEOUT_MS,
  GRPC_KEEPALIVE_TIME_MS,
  createGrpcServer,
} from './server.js';
export type { GrpcServer, GrpcServerOptions } from './server.js';
export {
  GrpcError,
  aborted,
  alreadyExists,
  cancelled,
  failedPrecondition,
  internal,
  invalidArgument,
  isGrpcError,
  notFound,
  resourceExhausted,
  unauthenticated,
  unavailable,
  unimplemented,
} from './status.js';
export { STATUS_DETAILS_TRAILER, decodeStatusDetails } from './status-details.js';
export type { FieldViolation, RichStatus, StatusDetails } from './status-details.js';
export { TASK_SERVICE_METHOD_KINDS, TASK_SERVICE_NAME } from './task-service.js';
export type { TaskServiceHandlers, TaskServiceMethodName } from './task-service.js';

/**
 * The gateway's gRPC server: `sluice.v1.TaskService` and `sluice.v1.AdminService` with the given
 * handlers, the standard health service and server reflection (v1 and v1alpha), all described by
 * one descriptor set.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type { UntypedServiceImplementation } from '@grpc/grpc-js';
import type { Logger } from '@sluice/telemetry';
import { ADMIN_SERVICE_NAME } from './admin-service.js';
import type { AdminServiceHandlers } from './admin-service.js';
import { readDescriptorSet } from './descriptor-set.js';
import { adaptServerStreaming, adaptUnary } from './handler-adapter.js';
import type {
  AdapterEnvironment,
  FinishedCall,
  ServerStreamingMethod,
  UnaryMethod,
} from './handler-adapter.js';
import { HEALTH_SERVICE_NAME, createHealthService } from './health.js';
import { REFLECTION_SERVICE_NAMES, loadApi } from './load-api.js';
import { createReflectionService } from './reflection.js';
import { unimplemented, unavailable } from './status.js';
import { TASK_SERVICE_NAME } from './task-service.js';
import type { TaskServiceHandlers } from './task-service.js';

/** The address the server listens on when none is given: every IPv4 interface. */
export const DEFAULT_GRPC_HOST = '0.0.0.0';

/**
 * How often the server pings each connection, in ms. A client that vanished without closing its
 * connection (a crashed host, a dropped NAT entry) is noticed within this plus
 * {@link GRPC_KEEPALIVE_TIMEOUT_MS}, which ends its `WatchTask` streams; grpc-js's default is
 * two hours.
 */
export const GRPC_KEEPALIVE_TIME_MS = 60_000;

/** How long a keepalive ping may go unanswered before the connection is closed, in ms. */
export const GRPC_KEEPALIVE_TIMEOUT_MS = 20_000;

/** Options of {@link createGrpcServer}. */
export interface GrpcServerOptions {
  /**
   * How long a unary handler may run before the call is answered `UNAVAILABLE` (default
   * `DEFAULT_UNARY_DEADLINE_MS` of the handler adapter).
   */
  unaryDeadlineMs?: number;
  /**
   * The TaskService handlers. A method left out answers `UNIMPLEMENTED` (still declared in the
   * API and described by reflection).
   */
  taskService: Partial<TaskServiceHandlers>;
  /**
   * The AdminService handlers; default none. As for TaskService, a method left out answers
   * `UNIMPLEMENTED`, and the service is declared and described by reflection either way.
   */
  adminService?: Partial<AdminServiceHandlers>;
  /** Logs the server's lifecycle and unexpected handler errors. */
  logger: Logger;
  /** TCP port; 0 picks a free one, which {@link GrpcServer.start} returns. */
  port: number;
  /** Interface to listen on; default {@link DEFAULT_GRPC_HOST}. IPv6 addresses need no brackets. */
  host?: string;
  /** Transport security; default plaintext. */
  credentials?: ServerCredentials;
  /** The compiled API; default `<repo>/proto/sluice.binpb` (`npm run proto:build`). */
  descriptorSetPath?: string;
  /**
   * Largest request the transport accepts, in bytes (default grpc-js's 4 MiB). Keep it well above
   * the handlers' own limits, so an oversized field gets their INVALID_ARGUMENT naming it rather
   * than the transport's anonymous RESOURCE_EXHAUSTED.
   */
  maxReceiveMessageBytes?: number;
  /** Called once per finished TaskService or AdminService call, e.g. to record metrics. */
  onCallFinished?: (call: FinishedCall) => void;
}

/** A gRPC server ready to start. */
export interface GrpcServer {
  /**
   * Binds the port, starts serving and reports `SERVING` on the health service.
   *
   * @returns The bound port (the chosen one when the option was 0).
   * @throws Error when the port cannot be bound, or the server was started before.
   */
  start(): Promise<number>;
  /**
   * Stops the server: reports `NOT_SERVING`, ends open streams (TaskService streams see their
   * signal abort with `UNAVAILABLE`; reflection streams end with `UNAVAILABLE`), lets unary calls
   * finish for up to `graceMs`, then cancels whatever is left. Idempotent.
   */
  stop(graceMs: number): Promise<void>;
  /**
   * Reports `SERVING` or `NOT_SERVING` on the health service, e.g. while a dependency is down.
   * Only meaningful between `start` and `stop`.
   */
  setServing(serving: boolean): void;
}

/**
 * Creates the gateway's gRPC server. Reads the descriptor set at once, so a missing or stale
 * one fails here rather than at the first call.
 *
 * @throws DescriptorSetError when the descriptor set is missing (the message names the command
 *   that builds it), malformed, or does not match the TypeScript declarations.
 */
export function createGrpcServer(options: GrpcServerOptions): GrpcServer {
  const { logger } = options;
  const descriptorSet = readDescriptorSet(options.descriptorSetPath);
  const api = loadApi(descriptorSet);
  const shutdown = new AbortController();
  const env: AdapterEnvironment = {
    logger,
    shutdownSignal: shutdown.signal,
    onCallFinished: options.onCallFinished,
    unaryDeadlineMs: options.unaryDeadlineMs,
  };

  const server = new Server({
    'grpc.keepalive_time_ms': GRPC_KEEPALIVE_TIME_MS,
    'grpc.keepalive_timeout_ms': GRPC_KEEPALIVE_TIMEOUT_MS,
    ...(options.maxReceiveMessageBytes === undefined
      ? {}
      : { 'grpc.max_receive_message_length': options.maxReceiveMessageBytes }),
  });
  server.addService(api.taskService, taskServiceImplementation(options.taskService, env));
  server.addService(api.adminService, adminServiceImplementation(options.adminService ?? {}, env));

  const health = createHealthService([TASK_SERVICE_NAME, ADMIN_SERVICE_NAME]);
  health.addToServer(server);

  const serviceNames = [
    TASK_SERVICE_NAME,
    ADMIN_SERVICE_NAME,
    HEALTH_SERVICE_NAME,
    REFLECTION_SERVICE_NAMES.v1,
    REFLECTION_SERVICE_NAMES.v1alpha,
  ];
  const reflection = createReflectionService({
    descriptorSet,
    serviceNames,
    shutdownSignal: shutdown.signal,
  });
  server.addService(api.reflectionV1, { ServerReflectionInfo: reflection });
  server.addService(api.reflectionV1alpha, { ServerReflectionInfo: reflection });

  const address = formatAddress(options.host ?? DEFAULT_GRPC_HOST, options.port);
  let started = false;
  let stopping: Promise<void> | undefined;

  return {
    async start() {
      if (started) throw new Error('the gRPC server was already started');
      started = true;
      const port = await new Promise<number>((resolve, reject) => {
        server.bindAsync(
          address,
          options.credentials ?? ServerCredentials.createInsecure(),
          (err, bound) => {
            if (err === null) resolve(bound);
            else
              reject(
                new Error(`cannot listen for gRPC on ${address}: ${err.message}`, { cause: err }),
              );
          },
        );
      });
      health.setServing(true);
      logger.info({ address, port, services: serviceNames }, 'gRPC server listening');
      return port;
    },

    stop(graceMs) {
      stopping ??= new Promise<void>((resolve) => {
        health.setServing(false);
        shutdown.abort(unavailable('the server is shutting down'));
        const force = setTimeout(() => {
          logger.warn({ graceMs }, 'gRPC calls still open after the grace period; cancelling them');
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }).then(() => logger.info('gRPC server stopped'));
      return stopping;
    },

    setServing(serving) {
      health.setServing(serving);
    },
  };
}

/** The grpc-js implementation of TaskService: each handler adapted, or `UNIMPLEMENTED`. */
function taskServiceImplementation(
  handlers: Partial<TaskServiceHandlers>,
  env: AdapterEnvironment,
): UntypedServiceImplementation {
  const { unary, streaming } = adapters(TASK_SERVICE_NAME, env);
  return {
    CreateTask: unary('CreateTask', handlers.CreateTask),
    CreateTasks: unary('CreateTasks', handlers.CreateTasks),
    GetTask: unary('GetTask', handlers.GetTask),
    WatchTask: streaming('WatchTask', handlers.WatchTask),
    ListTasks: unary('ListTasks', handlers.ListTasks),
    CancelTask: unary('CancelTask', handlers.CancelTask),
    ApproveTask: unary('ApproveTask', handlers.ApproveTask),
    PauseTask: unary('PauseTask', handlers.PauseTask),
    ResumeTask: unary('ResumeTask', handlers.ResumeTask),
    RetryTask: unary('RetryTask', handlers.RetryTask),
  } satisfies Record<keyof TaskServiceHandlers, unknown>;
}

/** The grpc-js implementation of AdminService: each handler adapted, or `UNIMPLEMENTED`. */
function adminServiceImplementation(
  handlers: Partial<AdminServiceHandlers>,
  env: AdapterEnvironment,
): UntypedServiceImplementation {
  const { unary } = adapters(ADMIN_SERVICE_NAME, env);
  return {
    CreateTenant: unary('CreateTenant', handlers.CreateTenant),
    ListTenants: unary('ListTenants', handlers.ListTenants),
    CreateApiKey: unary('CreateApiKey', handlers.CreateApiKey),
    ListApiKeys: unary('ListApiKeys', handlers.ListApiKeys),
    RevokeApiKey: unary('RevokeApiKey', handlers.RevokeApiKey),
    ListDeadLetters: unary('ListDeadLetters', handlers.ListDeadLetters),
    RedriveDeadLetters: unary('RedriveDeadLetters', handlers.RedriveDeadLetters),
    PurgeDeadLetters: unary('PurgeDeadLetters', handlers.PurgeDeadLetters),
    GetPressure: unary('GetPressure', handlers.GetPressure),
    SetOverride: unary('SetOverride', handlers.SetOverride),
    ClearOverride: unary('ClearOverride', handlers.ClearOverride),
  } satisfies Record<keyof AdminServiceHandlers, unknown>;
}

/**
 * Adapters for the methods of `serviceName`: a handler, or one answering `UNIMPLEMENTED` when
 * there is none.
 */
function adapters(serviceName: string, env: AdapterEnvironment) {
  const path = (name: string): string => `/${serviceName}/${name}`;
  const notImplemented =
    (name: string): (() => Promise<never>) =>
    () =>
      Promise.reject(unimplemented(`${serviceName}/${name} is not implemented yet`));
  return {
    unary: <Req, Res>(name: string, method: UnaryMethod<Req, Res> | undefined) =>
      adaptUnary(path(name), method ?? notImplemented(name), env),
    streaming: <Req, Res>(name: string, method: ServerStreamingMethod<Req, Res> | undefined) =>
      adaptServerStreaming(path(name), method ?? notImplemented(name), env),
  };
}

/** `host:port`, bracketing a bare IPv6 address as grpc-js expects (`[::]:50051`). */
function formatAddress(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * For this folder's tests: the task service on a real gRPC server, over a fresh migrated database
 * (tenant `acme` with one API key and the given task type) and the machine's NATS under a unique
 * prefix — what a test of the service's RPCs needs beyond the service itself.
 */
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog, type BusCatalog } from '@sluice/bus';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  createApiKey,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type Database,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import {
  createLogger,
  createMetrics,
  startTracing,
  type Tracing,
  type TracingOptions,
} from '@sluice/telemetry';
import { readDescriptorSet } from '../grpc/descriptor-set.js';
import type { FinishedCall } from '../grpc/handler-adapter.js';
import { loadApi } from '../grpc/load-api.js';
import { createGrpcServer, type GrpcServer } from '../grpc/server.js';
import { startEventHub, type EventHub } from './event-hub.js';
import { createTaskService } from './task-service.js';

const api = loadApi(readDescriptorSet());
const TaskServiceClient = grpc.makeGenericClientConstructor(api.taskService, 'TaskService');

export interface TestServerOptions {
  /** Names the NATS connection, the subject prefix and the log. */
  readonly name: string;
  /** Registered before the server starts. */
  readonly manifest: TaskTypeManifest;
  /** The tracing's span processors (a recorder); none: spans go nowhere. */
  readonly spanProcessors?: TracingOptions['spanProcessors'];
  /** Wraps the event hub the service listens on (e.g. to count listeners). */
  readonly hub?: (hub: EventHub) => EventHub;
  /** Told of every finished call. */
  readonly onCallFinished?: (call: FinishedCall) => void;
  /** Wraps the database the service reads and writes (e.g. to hold a read); none by default. */
  readonly db?: (db: Database) => Database;
  /** The watches' re-check interval; 1 s by default. */
  readonly watchRecheckMs?: number;
}

/** A started task service and what its tests reach it through. */
export interface TestServer {
  readonly handle: DatabaseHandle;
  readonly nc: NatsConnection;
  readonly catalog: BusCatalog;
  /** The key of tenant `acme`. */
  readonly apiKey: string;
  /**
   * Calls a TaskService method as `acme`; resolves with its status code and response, and the
   * status message of a failed call.
   */
  rpc(
    name: string,
    request: object,
    metadata?: Readonly<Record<string, string>>,
  ): Promise<{ code: grpc.status; response: unknown; details?: string }>;
  /** Opens a `WatchTask` stream as `acme`, with a deadline `deadlineMs` from now. */
  watch(request: object, deadlineMs: number): grpc.ClientReadableStream<unknown>;
  /** A raw client of the server, for streams. */
  readonly client: grpc.Client;
  /** The method definitions of TaskService. */
  readonly methods: typeof api.taskService;
  close(): Promise<void>;
}

export async function startTestServer(options: TestServerOptions): Promise<TestServer> {
  const log = createLogger({ service: `${options.name}-test`, level: 'silent' });
  const tracing: Tracing = startTracing({
    serviceName: 'gateway-test',
    env: {},
    ...(options.spanProcessors ? { spanProcessors: options.spanProcessors } : {}),
  });
  const database: TestDatabase = await createTestDatabase({
    template: await migratedTemplate(migrateDatabase),
  });
  const handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, options.manifest);
  const apiKey = await createApiKey(handle.db, { tenantId: 'acme' });
  const nc = await connectNats({ url: natsUrl(), name: `${options.name}-test` });
  const catalog = createBusCatalog(uniquePrefix(options.name));
  const hub = startEventHub(nc, catalog, log);
  const server: GrpcServer = createGrpcServer({
    logger: log,
    port: 0,
    host: '127.0.0.1',
    ...(options.onCallFinished ? { onCallFinished: options.onCallFinished } : {}),
    taskService: createTaskService({
      db: options.db ? options.db(handle.db) : handle.db,
      nc,
      catalog,
      hub: options.hub ? options.hub(hub) : hub,
      log,
      metrics: createMetrics(),
      tracer: tracing.tracer('@sluice/gateway'),
      maxInputBytes: 65_536,
      watchRecheckMs: options.watchRecheckMs ?? 1_000,
    }),
  });
  const port = await server.start();
  const client = new TaskServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());

  return {
    handle,
    nc,
    catalog,
    apiKey,
    client,
    methods: api.taskService,
    rpc(name, request, extra = {}) {
      const method = api.taskService[name];
      assert.ok(method !== undefined, `TaskService has no method ${name}`);
      const metadata = new grpc.Metadata();
      metadata.set('authorization', `Bearer ${apiKey}`);
      for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
      return new Promise((resolve) => {
        client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          request,
          metadata,
          { deadline: Date.now() + 5_000 },
          (err, response) =>
            resolve(
              err ? { code: err.code, response, details: err.details } : { code: 0, response },
            ),
        );
      });
    },
    watch(request, deadlineMs) {
      const method = api.taskService['WatchTask'];
      assert.ok(method !== undefined, 'TaskService has no method WatchTask');
      const metadata = new grpc.Metadata();
      metadata.set('authorization', `Bearer ${apiKey}`);
      return client.makeServerStreamRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        metadata,
        { deadline: Date.now() + deadlineMs },
      );
    },
    async close() {
      client.close();
      await server.stop(1_000);
      hub.close();
      await closeNats(nc);
      await handle.close();
      await database.drop();
      await tracing.shutdown();
    },
  };
}

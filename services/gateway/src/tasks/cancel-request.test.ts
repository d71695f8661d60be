/**
 * `CancelTask` of a running task publishes the cancel request that aborts its running steps on
 * their executors. The executors know a step by its task's stored id (lower case, as Postgres
 * prints a `uuid`); the API accepts the id in any case, so the request must name the stored id.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog, decodeMessageOf } from '@sluice/bus';
import type { BusCatalog } from '@sluice/bus';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  createApiKey,
  createTask,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createLogger, createMetrics, startTracing, type Tracing } from '@sluice/telemetry';
import { readDescriptorSet } from '../grpc/descriptor-set.js';
import { loadApi } from '../grpc/load-api.js';
import { createGrpcServer, type GrpcServer } from '../grpc/server.js';
import { startEventHub, type EventHub } from './event-hub.js';
import { createTaskService } from './task-service.js';

const manifest: TaskTypeManifest = {
  name: 'cancelled',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};
const api = loadApi(readDescriptorSet());
const TaskServiceClient = grpc.makeGenericClientConstructor(api.taskService, 'TaskService');
const log = createLogger({ service: 'cancel-request-test', level: 'silent' });

describe('the cancel request of CancelTask', () => {
  let tracing: Tracing;
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let nc: NatsConnection;
  let catalog: BusCatalog;
  let hub: EventHub;
  let server: GrpcServer;
  let client: grpc.Client;
  let apiKey: string;

  before(async () => {
    tracing = startTracing({ serviceName: 'gateway-test', env: {} });
    database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
    handle = openDatabase(database.url, { max: 4 });
    await createTenant(handle.db, { id: 'acme' });
    await registerTaskType(handle.db, manifest);
    apiKey = await createApiKey(handle.db, { tenantId: 'acme' });
    nc = await connectNats({ url: natsUrl(), name: 'cancel-request-test' });
    catalog = createBusCatalog(uniquePrefix('cancel_request'));
    hub = startEventHub(nc, catalog, log);
    server = createGrpcServer({
      logger: log,
      port: 0,
      host: '127.0.0.1',
      taskService: createTaskService({
        db: handle.db,
        nc,
        catalog,
        hub,
        log,
        metrics: createMetrics(),
        tracer: tracing.tracer('@sluice/gateway'),
        maxInputBytes: 65_536,
        watchRecheckMs: 1_000,
      }),
    });
    const port = await server.start();
    client = new TaskServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });
  after(async () => {
    client?.close();
    await server?.stop(1_000);
    hub?.close();
    if (nc) await closeNats(nc);
    await handle?.close();
    await database?.drop();
    await tracing?.shutdown();
  });

  const cancel = (taskId: string): Promise<grpc.status> => {
    const method = api.taskService.CancelTask;
    assert.ok(method !== undefined);
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${apiKey}`);
    return new Promise((resolve) => {
      client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        { task_id: taskId, reason: '' },
        metadata,
        { deadline: Date.now() + 5_000 },
        (err) => resolve(err ? err.code : grpc.status.OK),
      );
    });
  };

  it('names the stored task id when the caller spells it in capitals', async () => {
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await handle.sql`update tasks set status = 'running' where id = ${task.id}`;
    const requests: Array<{ subject: string; taskId: string }> = [];
    const subscription: Subscription = nc.subscribe(catalog.subjects.cancelAll, {
      callback: (error, message) => {
        if (error) return;
        const request = decodeMessageOf('task.cancel', message.subject, message.data);
        requests.push({ subject: message.subject, taskId: request.task_id });
      },
    });
    await nc.flush();
    try {
      assert.equal(await cancel(task.id.toUpperCase()), grpc.status.OK);
      const deadline = Date.now() + 2_000;
      while (requests.length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(requests, [{ subject: catalog.subjects.cancel(task.id), taskId: task.id }]);
    } finally {
      subscription.unsubscribe();
    }
  });
});

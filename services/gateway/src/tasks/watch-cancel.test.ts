/**
 * A `WatchTask` whose client stops reading and then cancels ends on the gateway: its handler
 * returns and its listener on the event hub goes. A handler waiting for the stream to drain (the
 * client's flow control window full) waited for a `'drain'` that a cancelled call never emits, so
 * each such watch stayed on the gateway for good, with its buffered events and its listener.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, createBusCatalog } from '@sluice/bus';
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
import type { FinishedCall } from '../grpc/handler-adapter.js';
import { loadApi } from '../grpc/load-api.js';
import { createGrpcServer, type GrpcServer } from '../grpc/server.js';
import { startEventHub, type EventHub } from './event-hub.js';
import { createTaskService } from './task-service.js';

const manifest: TaskTypeManifest = {
  name: 'watched',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'call',
  steps: [{ name: 'call', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 }],
};
/** Events of 16 KB each: far more than a stream's flow control window and buffers hold. */
const EVENTS = 400;
const api = loadApi(readDescriptorSet());
const TaskServiceClient = grpc.makeGenericClientConstructor(api.taskService, 'TaskService');
const log = createLogger({ service: 'watch-cancel-test', level: 'silent' });

describe('WatchTask cancelled while its writes wait for the client', () => {
  let tracing: Tracing;
  let database: TestDatabase;
  let handle: DatabaseHandle;
  let nc: NatsConnection;
  let hub: EventHub;
  let server: GrpcServer;
  let client: grpc.Client;
  let apiKey: string;
  let listening = 0;
  const finished: FinishedCall[] = [];

  before(async () => {
    tracing = startTracing({ serviceName: 'gateway-test', env: {} });
    database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
    handle = openDatabase(database.url, { max: 4 });
    await createTenant(handle.db, { id: 'acme' });
    await registerTaskType(handle.db, manifest);
    apiKey = await createApiKey(handle.db, { tenantId: 'acme' });
    nc = await connectNats({ url: natsUrl(), name: 'watch-cancel-test' });
    const catalog = createBusCatalog(uniquePrefix('watch-cancel'));
    hub = startEventHub(nc, catalog, log);
    // Counts the watchers listening on the hub.
    const countingHub: EventHub = {
      async listen(taskId, listener) {
        const stop = await hub.listen(taskId, listener);
        listening += 1;
        return () => {
          listening -= 1;
          stop();
        };
      },
      close: () => hub.close(),
    };
    server = createGrpcServer({
      logger: log,
      port: 0,
      host: '127.0.0.1',
      onCallFinished: (call) => void finished.push(call),
      taskService: createTaskService({
        db: handle.db,
        nc,
        catalog,
        hub: countingHub,
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

  it('ends the handler and stops listening once the client cancels', async () => {
    const { task } = await createTask(handle.db, {
      tenantId: 'acme',
      taskType: manifest,
      priority: 2,
      input: {},
    });
    await handle.sql`
      insert into task_events (task_id, tenant_id, seq, type, data)
      select ${task.id}::uuid, 'acme', seq, 'step_progress',
             jsonb_build_object('message', repeat('x', 16000))
      from generate_series(2, ${EVENTS + 1}) as seq`;
    await handle.sql`update tasks set last_event_seq = ${EVENTS + 1} where id = ${task.id}`;

    const method = api.taskService['WatchTask'];
    assert.ok(method !== undefined);
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${apiKey}`);
    const stream = client.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { task_id: task.id, after_seq: '0' },
      metadata,
      { deadline: Date.now() + 30_000 },
    );
    stream.on('error', () => undefined); // the cancel's own CANCELLED
    // Reads one message, then nothing: the windows fill and the gateway's writes wait.
    await new Promise((resolve) => stream.once('data', resolve));
    stream.pause();
    await waitFor(() => listening === 1, 'the watch listens');
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.ok(!finished.some((call) => call.method.endsWith('/WatchTask')), 'still streaming');
    stream.cancel();
    await waitFor(
      () => finished.some((call) => call.method.endsWith('/WatchTask')),
      'the WatchTask handler ends',
    );
    assert.equal(listening, 0, 'the watch no longer listens on the hub');
  });
});

async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

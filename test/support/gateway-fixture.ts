/**
 * A gateway running in the test's own process on the machine's real NATS and Postgres, for tests
 * of the API's edges (bad input, authentication): a fresh migrated database with the sample task
 * type registered, a unique prefix, raw and typed gRPC clients, and a probe that proves a call
 * wrote no row and published no message.
 */
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import { PROTO_LOADER_OPTIONS, PROTO_ROOT, TASK_SERVICE_PROTO } from '@sluice/api';
import { closeNats, connectNats, createBusCatalog, type BusCatalog } from '@sluice/bus';
import { natsUrl, uniquePrefix } from '@sluice/bus/testing';
import {
  applyTransition,
  createApiKey,
  createTenant,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createTaskClient, type TaskClient } from '@sluice/sdk/client';
import type { Logger } from '@sluice/telemetry';
import { researchBrief } from '../../services/executor/src/builtin-tasks/research-brief.js';
import { manifestOf } from '../../services/executor/src/task-registry.js';
import { startGateway, type Gateway } from '../../services/gateway/src/app.js';
import { loadGatewayConfig } from '../../services/gateway/src/config.js';
import {
  STATUS_DETAILS_TRAILER,
  decodeStatusDetails,
  type FieldViolation,
} from '../../services/gateway/src/grpc/status-details.js';

/** How long a probe waits for the gateway's barrier message before failing. */
const BARRIER_DEADLINE_MS = 10_000;

/** Rows of the tables a task lives in. */
export interface RowCounts {
  readonly tasks: number;
  readonly task_steps: number;
  readonly task_events: number;
}

/** A `sluice.v1.TaskService` client that sends exactly the request and metadata it is given. */
export interface RawTaskClient {
  /** Calls a unary method; rejects with the grpc-js `ServiceError`. */
  unary(method: string, request: object, metadata?: grpc.Metadata): Promise<unknown>;
  /** Calls `WatchTask` and collects the stream's messages; rejects with its error status. */
  watch(request: object, metadata?: grpc.Metadata): Promise<unknown[]>;
  close(): void;
}

/** What {@link startGatewayFixture} returns. */
export interface GatewayFixture {
  /** `host:port` of the gateway's gRPC API. */
  readonly address: string;
  readonly prefix: string;
  readonly catalog: BusCatalog;
  /** The test's own pool on the gateway's database. */
  readonly database: DatabaseHandle;
  /** Creates a tenant and returns a new API key of it. */
  tenantWithKey(tenantId: string): Promise<string>;
  /** A typed client calling with `apiKey`; closed by {@link GatewayFixture.stop}. */
  client(apiKey: string): TaskClient;
  /** A raw client; closed by {@link GatewayFixture.stop}. */
  raw(): RawTaskClient;
  rowCounts(): Promise<RowCounts>;
  /**
   * Runs `action` and proves it left no trace: the task tables hold the same rows afterwards, no
   * message appeared under `<prefix>.>` and the STEPS stream gained none.
   *
   * The "no message" half cannot simply wait for a while. Instead, before and after `action`, the
   * gateway is made to publish a message naming a task only this probe knows (the cancel request
   * of a running task). NATS delivers one connection's messages in order, so what arrives between
   * the two barriers is exactly what the gateway published in between.
   */
  expectNoEffect(action: () => Promise<void>): Promise<void>;
  /** Stops the gateway, closes every client and connection, drops the database. */
  stop(): Promise<void>;
}

/** A bearer `authorization` header, as a client sends it. */
export function bearer(apiKey: string): grpc.Metadata {
  return authorization(`Bearer ${apiKey}`);
}

/** Metadata with one `authorization` value, exactly as given. */
export function authorization(...values: string[]): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const value of values) metadata.add('authorization', value);
  return metadata;
}

/** Awaits a call that must fail with `code`; returns the `ServiceError`. */
export async function expectStatus(
  call: Promise<unknown>,
  code: grpc.status,
): Promise<grpc.ServiceError> {
  const outcome = await call.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  assert.ok('error' in outcome, `expected ${grpc.status[code]}, the call succeeded`);
  const error = outcome.error as grpc.ServiceError;
  assert.equal(
    error.code,
    code,
    `expected ${grpc.status[code]}, got ${grpc.status[error.code]}: ${error.details}`,
  );
  return error;
}

/** The `google.rpc.BadRequest` field violations in an error's status details. */
export function fieldViolationsOf(error: grpc.ServiceError): FieldViolation[] {
  const [bytes] = error.metadata?.get(STATUS_DETAILS_TRAILER) ?? [];
  assert.ok(Buffer.isBuffer(bytes), `no ${STATUS_DETAILS_TRAILER} trailer on: ${error.details}`);
  const status = decodeStatusDetails(bytes);
  assert.equal(status.code, error.code, 'the detailed status repeats the code');
  return status.fieldViolations ?? [];
}

/**
 * Asserts `INVALID_ARGUMENT` naming `field`: the message starts with it and the BadRequest detail
 * has exactly one violation of it.
 */
export async function expectInvalidField(call: Promise<unknown>, field: string): Promise<string> {
  const error = await expectStatus(call, grpc.status.INVALID_ARGUMENT);
  assert.ok(
    error.details.startsWith(`${field}: `),
    `the message names ${field}: "${error.details}"`,
  );
  assert.deepEqual(
    fieldViolationsOf(error).map((v) => v.field),
    [field],
    `the BadRequest detail names ${field}`,
  );
  return error.details;
}

/** Options of {@link startGatewayFixture}. */
export interface GatewayFixtureOptions {
  /**
   * The gateway's logger, e.g. one writing to a stream the test reads; default the gateway's own
   * at level `warn`.
   */
  readonly log?: Logger;
  /** More of the gateway's configuration (`SLUICE_*` variables), over the fixture's own. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * The URL the gateway reaches its database by, given the database's own (e.g. through a proxy
   * that counts round trips); default the database's URL. The fixture's own pool connects directly.
   */
  readonly gatewayDatabaseUrl?: (databaseUrl: string) => Promise<string>;
}

/** Starts the gateway and everything around it. */
export async function startGatewayFixture(
  label: string,
  options: GatewayFixtureOptions = {},
): Promise<GatewayFixture> {
  const testDatabase = await createTestDatabase({
    template: await migratedTemplate(migrateDatabase),
  });
  const cleanups: (() => Promise<void> | void)[] = [() => testDatabase.drop()];
  // Undoes everything in reverse order, all of it even when a step fails; reports the first failure.
  const cleanUp = async () => {
    const failures: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  };
  try {
    return await assemble(label, options, testDatabase, cleanups, cleanUp);
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

async function assemble(
  label: string,
  options: GatewayFixtureOptions,
  testDatabase: TestDatabase,
  cleanups: (() => Promise<void> | void)[],
  cleanUp: () => Promise<void>,
): Promise<GatewayFixture> {
  const database = openDatabase(testDatabase.url, { max: 4, applicationName: 'gateway-fixture' });
  cleanups.push(() => database.close());
  await registerTaskType(database.db, manifestOf(researchBrief));

  const prefix = uniquePrefix(label);
  const catalog = createBusCatalog(prefix);
  const nc: NatsConnection = await connectNats({ url: natsUrl(), name: `${label}-test` });
  cleanups.push(() => closeNats(nc));
  const jsm = await jetstreamManager(nc);
  // The gateway creates the streams; each reserves its max_bytes on the shared server, so leaving
  // them behind would exhaust its JetStream storage after a few runs.
  cleanups.push(async () => {
    for (const name of Object.values(catalog.streams)) {
      await jsm.streams.delete(name).catch((error: unknown) => {
        if (!(error instanceof JetStreamApiError)) throw error; // not found: never created
      });
    }
  });
  const gateway: Gateway = await startGateway(
    loadGatewayConfig({
      NATS_URL: natsUrl(),
      DATABASE_URL: options.gatewayDatabaseUrl
        ? await options.gatewayDatabaseUrl(testDatabase.url)
        : testDatabase.url,
      SLUICE_PREFIX: prefix,
      SLUICE_GRPC_PORT: '0',
      SLUICE_METRICS_PORT: '0',
      SLUICE_LOG_LEVEL: 'warn',
      ...options.env,
    }),
    options.log ? { log: options.log } : {},
  );
  cleanups.push(() => gateway.stop());
  const address = `127.0.0.1:${gateway.grpcPort}`;

  const clients: { close(): void }[] = [];
  cleanups.push(() => clients.forEach((c) => c.close()));
  const client = (apiKey: string): TaskClient => {
    const created = createTaskClient({ address, apiKey, timeoutMs: 10_000 });
    clients.push(created);
    return created;
  };
  const raw = (): RawTaskClient => {
    const created = createRawTaskClient(address);
    clients.push(created);
    return created;
  };

  const tenantWithKey = async (tenantId: string): Promise<string> => {
    await createTenant(database.db, { id: tenantId });
    return createApiKey(database.db, { tenantId });
  };

  const rowCounts = async (): Promise<RowCounts> => {
    const [row] = await database.sql<[{ tasks: number; task_steps: number; task_events: number }]>`
      select (select count(*)::int from tasks) as tasks,
             (select count(*)::int from task_steps) as task_steps,
             (select count(*)::int from task_events) as task_events`;
    return { tasks: row.tasks, task_steps: row.task_steps, task_events: row.task_events };
  };

  // The barrier's own tenant, so its tasks never show up in what the tests look at.
  const barrierTenant = 'barrier';
  const barrierClient = client(await tenantWithKey(barrierTenant));

  const expectNoEffect = async (action: () => Promise<void>): Promise<void> => {
    const received: Msg[] = [];
    const waiting = new Map<string, () => void>();
    const subscription = nc.subscribe(`${prefix}.>`, {
      callback: (error, message) => {
        if (error) return;
        received.push(message);
        waiting.get(message.subject)?.();
      },
    });
    /**
     * Makes the gateway publish a message naming a fresh task (the cancel request of a task of the
     * barrier tenant, made running as a scheduler would) and waits for it; returns its index in
     * `received`. Its create also publishes a wake-up, just before.
     */
    const barrier = async (): Promise<number> => {
      const { task } = await barrierClient.createTask({
        type: researchBrief.name,
        priority: 'PRIORITY_P3',
        input: { topic: 'barrier', sourceUrl: 'http://127.0.0.1/barrier' },
      });
      const started = await applyTransition(database.db, {
        taskId: task.task_id,
        tenantId: barrierTenant,
        event: { type: 'start' },
      });
      assert.ok(started.ok, 'the barrier task is running');
      const subject = catalog.subjects.cancel(task.task_id);
      const arrived = new Promise<void>((resolve) => waiting.set(subject, resolve));
      await barrierClient.cancelTask(task.task_id, 'barrier');
      await withDeadline(arrived, BARRIER_DEADLINE_MS, `the barrier message ${subject}`);
      waiting.delete(subject);
      return received.findIndex((m) => m.subject === subject);
    };
    try {
      await nc.flush(); // the server knows the subscription before the first barrier
      // Whatever the gateway published before (e.g. the wake-up of a create the test just made)
      // arrives before this first barrier, and is not the action's.
      const first = await barrier();
      const before = await rowCounts();
      // Not zero once a P0 task was created: the gateway dispatches those itself (urgent claim).
      const stepsBefore = (await jsm.streams.info(catalog.streams.steps)).state.messages;
      await action();
      assert.deepEqual(await rowCounts(), before, 'no row was written');
      const last = await barrier();
      assert.deepEqual(
        received.slice(first + 1, last).map((m) => m.subject),
        // The first barrier's cancel wakes the scheduler (to settle it) right after its cancel
        // request; the second barrier's create wakes its dispatcher before its own cancel request.
        [catalog.subjects.wake('scheduler'), catalog.subjects.wake('dispatch')],
        'nothing was published between the barriers but the barrier tasks’ own wake-ups',
      );
      const { state } = await jsm.streams.info(catalog.streams.steps);
      assert.equal(state.messages, stepsBefore, 'the STEPS stream gained no message');
    } finally {
      subscription.unsubscribe();
    }
  };

  return {
    address,
    prefix,
    catalog,
    database,
    tenantWithKey,
    client,
    raw,
    rowCounts,
    expectNoEffect,
    stop: cleanUp,
  };
}

/** Resolves as `promise` does, or rejects when it has not settled after `timeoutMs`. */
async function withDeadline<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

type UnaryStub = (
  request: object,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response: unknown) => void,
) => void;

type StreamStub = (
  request: object,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
) => grpc.ClientReadableStream<unknown>;

/** Builds a client from the `.proto` sources, without the SDK's conveniences. */
export function createRawTaskClient(address: string): RawTaskClient {
  const definition = protoLoader.loadSync(TASK_SERVICE_PROTO, {
    ...PROTO_LOADER_OPTIONS,
    includeDirs: [PROTO_ROOT],
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    sluice: { v1: { TaskService: grpc.ServiceClientConstructor } };
  };
  const stub = new loaded.sluice.v1.TaskService(address, grpc.credentials.createInsecure());
  // The generated methods, looked up by name as the caller gives it.
  const methods = stub as unknown as Record<string, unknown>;
  const deadline = () => ({ deadline: Date.now() + 10_000 });
  return {
    unary: (method, request, metadata = new grpc.Metadata()) =>
      new Promise((resolve, reject) => {
        const call = methods[method] as UnaryStub | undefined;
        if (!call) return reject(new Error(`no method ${method}`));
        call.call(stub, request, metadata, deadline(), (error, response) =>
          error ? reject(error) : resolve(response),
        );
      }),
    watch: async (request, metadata = new grpc.Metadata()) => {
      const call = methods['WatchTask'] as StreamStub;
      const stream = call.call(stub, request, metadata, deadline());
      const messages: unknown[] = [];
      for await (const message of stream) messages.push(message);
      return messages;
    },
    close: () => stub.close(),
  };
}

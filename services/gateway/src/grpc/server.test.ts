/**
 * The gRPC server's plumbing over a real loopback connection: handler outcomes to statuses, rich
 * error details, streaming, cancellation, health and shutdown.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { createLogger } from '@sluice/telemetry';
import { readDescriptorSet } from './descriptor-set.js';
import type { FinishedCall } from './handler-adapter.js';
import { loadApi } from './load-api.js';
import { createGrpcServer } from './server.js';
import type { GrpcServer } from './server.js';
import { STATUS_DETAILS_TRAILER, decodeStatusDetails } from './status-details.js';
import { invalidArgument, resourceExhausted } from './status.js';
import type { TaskEvent } from '@sluice/api';

const DEADLINE_MS = 5_000;
/** The server's bound on unary handlers in these tests. */
const UNARY_DEADLINE_MS = 300;
const api = loadApi(readDescriptorSet());
const TaskServiceClient = grpc.makeGenericClientConstructor(api.taskService, 'TaskService');

function event(seq: number): TaskEvent {
  return {
    task_id: 't-1',
    seq: String(seq),
    type: 'step_succeeded',
    from_status: 'TASK_STATUS_RUNNING',
    to_status: 'TASK_STATUS_RUNNING',
    step: `step-${seq}`,
    create_time: null,
    data: '',
  };
}

/** Calls a unary method by its RPC name and resolves with the error it answers. */
function callFailing(
  client: grpc.Client,
  name: string,
  request: object,
): Promise<grpc.ServiceError> {
  const method = api.taskService[name];
  assert.ok(method !== undefined);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + DEADLINE_MS },
      (err) => (err ? resolve(err) : reject(new Error(`${name} succeeded unexpectedly`))),
    );
  });
}

function openWatch(client: grpc.Client): grpc.ClientReadableStream<{ event: TaskEvent }> {
  const method = api.taskService.WatchTask;
  assert.ok(method !== undefined);
  return client.makeServerStreamRequest(
    method.path,
    method.requestSerialize,
    (bytes: Buffer) => method.responseDeserialize(bytes) as { event: TaskEvent },
    { task_id: 't-1', after_seq: '0' },
    new grpc.Metadata(),
    { deadline: Date.now() + DEADLINE_MS },
  );
}

/** Collects a stream's messages and its final status (an error status included). */
function drain<T>(
  stream: grpc.ClientReadableStream<T>,
): Promise<{ messages: T[]; code: grpc.status }> {
  const messages: T[] = [];
  stream.on('data', (message: T) => messages.push(message));
  stream.on('error', () => undefined); // reported by the status event too
  return new Promise((resolve) => {
    stream.on('status', (status: grpc.StatusObject) => resolve({ messages, code: status.code }));
  });
}

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('createGrpcServer', () => {
  const logLines: string[] = [];
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().trim().split('\n')));
  const finished: FinishedCall[] = [];
  let watchAborted: unknown;
  let server: GrpcServer;
  let client: grpc.Client;

  before(async () => {
    server = createGrpcServer({
      logger: createLogger({ service: 'grpc-test', level: 'error', destination: logStream }),
      port: 0,
      host: '127.0.0.1',
      onCallFinished: (call) => finished.push(call),
      unaryDeadlineMs: UNARY_DEADLINE_MS,
      taskService: {
        // What the Postgres client rejects with while the database is down.
        CancelTask: () =>
          Promise.reject(
            Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
              code: 'ECONNREFUSED',
            }),
          ),
        // A handler stuck on a dependency that never answers.
        ResumeTask: () => new Promise(() => undefined),
        GetTask: () => Promise.reject(invalidArgument('task_id', 'is required')),
        ListTasks: () => Promise.reject(resourceExhausted('P3 admission is paused', 1_500)),
        RetryTask: () => Promise.reject(new Error('connection to the database was reset')),
        async WatchTask(call, { signal }) {
          if (call.metadata.get('mode')[0] === 'hang') {
            call.write({ event: event(0) });
            await new Promise((_, reject) => {
              signal.addEventListener('abort', () => {
                watchAborted = signal.reason;
                reject(signal.reason as Error);
              });
            });
          }
          for (const seq of [1, 2, 3]) call.write({ event: event(seq) });
        },
      },
    });
    const port = await server.start();
    client = new TaskServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    await server?.stop(1_000);
  });

  it('sends INVALID_ARGUMENT naming the field, with a google.rpc.BadRequest detail', async () => {
    const err = await callFailing(client, 'GetTask', { task_id: '' });
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(err.details, 'task_id: is required');
    const [details] = err.metadata.get(STATUS_DETAILS_TRAILER);
    assert.ok(Buffer.isBuffer(details));
    assert.deepEqual(decodeStatusDetails(details), {
      code: grpc.status.INVALID_ARGUMENT,
      message: 'task_id: is required',
      fieldViolations: [{ field: 'task_id', description: 'is required' }],
    });
  });

  it('sends RESOURCE_EXHAUSTED with a google.rpc.RetryInfo in grpc-status-details-bin', async () => {
    const err = await callFailing(client, 'ListTasks', {});
    assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED);
    const [details] = err.metadata.get(STATUS_DETAILS_TRAILER);
    assert.ok(Buffer.isBuffer(details));
    assert.deepEqual(decodeStatusDetails(details), {
      code: grpc.status.RESOURCE_EXHAUSTED,
      message: 'P3 admission is paused',
      retryDelayMs: 1_500,
    });
  });

  it('hides unexpected errors behind INTERNAL and logs them', async () => {
    const err = await callFailing(client, 'RetryTask', { task_id: 't-1' });
    assert.equal(err.code, grpc.status.INTERNAL);
    assert.equal(err.details, 'internal error');
    await waitFor(() => logLines.some((line) => line.includes('gRPC handler failed')), 'log line');
    const line = logLines.find((l) => l.includes('gRPC handler failed')) ?? '';
    assert.match(line, /\/sluice\.v1\.TaskService\/RetryTask/);
  });

  it('answers UNAVAILABLE when the database cannot be reached', async () => {
    const err = await callFailing(client, 'CancelTask', { task_id: 't-1', reason: '' });
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.equal(err.details, 'the database is unavailable; retry later');
  });

  it('answers UNAVAILABLE at its deadline for a handler that does not finish', async () => {
    const started = Date.now();
    const err = await callFailing(client, 'ResumeTask', { task_id: 't-1' });
    const elapsed = Date.now() - started;
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.match(err.details, /no answer within 300 ms/);
    assert.ok(elapsed >= UNARY_DEADLINE_MS - 20 && elapsed < DEADLINE_MS, `${elapsed} ms`);
  });

  it('answers UNIMPLEMENTED for a method without a handler', async () => {
    const err = await callFailing(client, 'PauseTask', { task_id: 't-1' });
    assert.equal(err.code, grpc.status.UNIMPLEMENTED);
  });

  it('streams what a streaming handler writes, then ends with OK', async () => {
    const { messages, code } = await drain(openWatch(client));
    assert.equal(code, grpc.status.OK);
    assert.deepEqual(
      messages.map((m) => m.event.seq),
      ['1', '2', '3'],
    );
    assert.equal(messages[0]?.event.step, 'step-1');
  });

  it('aborts the handler signal with CANCELLED when the client cancels', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('mode', 'hang');
    const method = api.taskService.WatchTask;
    assert.ok(method !== undefined);
    const stream = client.makeServerStreamRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      { task_id: 't-1' },
      metadata,
      { deadline: Date.now() + DEADLINE_MS },
    );
    stream.on('error', () => undefined); // the client's own cancellation
    const before = finished.length;
    await once(stream, 'data'); // the handler runs and now waits for its signal
    stream.cancel();
    await waitFor(() => finished.length > before, 'the cancelled call to finish');
    assert.equal((watchAborted as grpc.ServiceError | undefined)?.code, grpc.status.CANCELLED);
    assert.equal(finished.at(-1)?.code, grpc.status.CANCELLED);
    assert.equal(finished.at(-1)?.streaming, true);
  });

  it('reports every finished call with its method and code', () => {
    const seen = new Set(finished.map((call) => `${call.method} ${call.code}`));
    assert.ok(seen.has(`/sluice.v1.TaskService/GetTask ${grpc.status.INVALID_ARGUMENT}`));
    assert.ok(seen.has(`/sluice.v1.TaskService/WatchTask ${grpc.status.OK}`));
    assert.ok(finished.every((call) => call.durationMs >= 0));
  });

  it('reports health, and NOT_SERVING on request', async () => {
    const check = healthService.Check;
    assert.ok(check !== undefined);
    const status = (): Promise<string> =>
      new Promise((resolve, reject) => {
        client.makeUnaryRequest(
          check.path,
          check.requestSerialize,
          check.responseDeserialize,
          { service: 'sluice.v1.TaskService' },
          (err, response) => (err ? reject(err) : resolve((response as { status: string }).status)),
        );
      });
    assert.equal(await status(), 'SERVING');
    server.setServing(false);
    assert.equal(await status(), 'NOT_SERVING');
    server.setServing(true);
    assert.equal(await status(), 'SERVING');
  });
});

describe('GrpcServer.stop', () => {
  it('ends open streams with UNAVAILABLE at once instead of waiting out the grace period', async () => {
    let signalReason: unknown;
    const server = createGrpcServer({
      logger: createLogger({ service: 'grpc-test', level: 'silent' }),
      port: 0,
      host: '127.0.0.1',
      taskService: {
        async WatchTask(call, { signal }) {
          call.write({ event: event(1) });
          await new Promise((_, reject) => {
            signal.addEventListener('abort', () => {
              signalReason = signal.reason;
              reject(signal.reason as Error);
            });
          });
        },
      },
    });
    const port = await server.start();
    const client = new TaskServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    try {
      const stream = openWatch(client);
      const [first] = (await once(stream, 'data')) as [{ event: TaskEvent }];
      assert.equal(first.event.seq, '1');

      const started = Date.now();
      const [{ code }] = await Promise.all([drain(stream), server.stop(30_000)]);
      assert.equal(code, grpc.status.UNAVAILABLE);
      assert.equal((signalReason as grpc.ServiceError | undefined)?.code, grpc.status.UNAVAILABLE);
      assert.ok(Date.now() - started < 10_000, 'stop did not wait for the grace period');
    } finally {
      client.close();
      await server.stop(1_000);
    }
  });

  it('resolves for a server that never started, and is idempotent', async () => {
    const server = createGrpcServer({
      logger: createLogger({ service: 'grpc-test', level: 'silent' }),
      port: 0,
      taskService: {},
    });
    await server.stop(100);
    await server.stop(100);
  });
});

describe('createGrpcServer without a descriptor set', () => {
  it('fails with a message naming the command that builds it', () => {
    assert.throws(
      () =>
        createGrpcServer({
          logger: createLogger({ service: 'grpc-test', level: 'silent' }),
          port: 0,
          taskService: {},
          descriptorSetPath: '/nonexistent/sluice.binpb',
        }),
      /\/nonexistent\/sluice\.binpb does not exist; build it with `npm run proto:build`/,
    );
  });
});

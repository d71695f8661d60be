/**
 * RPC server spans over a real loopback connection: the conventions' name, kind and attributes, the
 * status code, and a caller's `traceparent` continued — the span a handler opens (as `CreateTask`
 * opens the task's) is then part of the caller's trace.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  createLogger,
  startTracing,
  traceparentOfActiveSpan,
  withSpan,
  type Tracing,
  type TracingOptions,
} from '@sluice/telemetry';
import { readDescriptorSet } from './descriptor-set.js';
import { loadApi } from './load-api.js';
import { createGrpcServer, type GrpcServer } from './server.js';
import { internal, notFound } from './status.js';

type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];
type RecordedSpan = Parameters<SpanProcessor['onEnd']>[0];

const api = loadApi(readDescriptorSet());
const TaskServiceClient = grpc.makeGenericClientConstructor(api.taskService, 'TaskService');
const CALLER_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN_ID = '00f067aa0ba902b7';

/** Calls a unary TaskService method; resolves with the status code it answered. */
function call(client: grpc.Client, name: string, metadata: grpc.Metadata): Promise<grpc.status> {
  const method = api.taskService[name];
  assert.ok(method !== undefined);
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      method.path,
      method.requestSerialize,
      method.responseDeserialize,
      {},
      metadata,
      { deadline: Date.now() + 5_000 },
      (err) => resolve(err ? err.code : grpc.status.OK),
    );
  });
}

describe('RPC server spans', () => {
  const ended: RecordedSpan[] = [];
  const recorder: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => void ended.push(span),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  let tracing: Tracing;
  let server: GrpcServer;
  let client: grpc.Client;
  /** The traceparent the ListTasks handler saw as active inside its own span. */
  let seenInHandler: string | undefined;

  before(async () => {
    tracing = startTracing({ serviceName: 'gateway-test', env: {}, spanProcessors: [recorder] });
    const tracer = tracing.tracer('test');
    server = createGrpcServer({
      logger: createLogger({ service: 'test', level: 'silent' }),
      port: 0,
      host: '127.0.0.1',
      taskService: {
        // As CreateTask opens the task's span: the handler's own span, under the RPC span.
        ListTasks: () =>
          withSpan(tracer, 'handler.work', {}, () => {
            seenInHandler = traceparentOfActiveSpan();
            return Promise.resolve({ tasks: [], next_page_token: '' });
          }),
        GetTask: () => Promise.reject(notFound('no such task')),
        CreateTask: () => Promise.reject(internal()),
      },
    });
    const port = await server.start();
    client = new TaskServiceClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  });
  after(async () => {
    client.close();
    await server.stop(1_000);
    await tracing.shutdown();
  });
  beforeEach(() => {
    ended.length = 0;
    seenInHandler = undefined;
  });

  const named = (name: string): RecordedSpan => {
    const span = ended.find((s) => s.name === name);
    assert.ok(span, `no span ${name} among ${ended.map((s) => s.name).join(', ')}`);
    return span;
  };

  it("continues the caller's trace: the handler's span is a child of the RPC span", async () => {
    const metadata = new grpc.Metadata();
    metadata.set('traceparent', `00-${CALLER_TRACE_ID}-${CALLER_SPAN_ID}-01`);
    assert.equal(await call(client, 'ListTasks', metadata), grpc.status.OK);
    const rpc = named('sluice.v1.TaskService/ListTasks');
    const work = named('handler.work');
    assert.equal(rpc.kind, SpanKind.SERVER);
    assert.equal(rpc.spanContext().traceId, CALLER_TRACE_ID);
    assert.equal(rpc.parentSpanContext?.spanId, CALLER_SPAN_ID);
    assert.equal(work.spanContext().traceId, CALLER_TRACE_ID);
    assert.equal(work.parentSpanContext?.spanId, rpc.spanContext().spanId);
    // What CreateTask stores on the task row names its span, in the caller's trace.
    assert.equal(seenInHandler, `00-${CALLER_TRACE_ID}-${work.spanContext().spanId}-01`);
    assert.deepEqual(rpc.attributes, {
      'rpc.system': 'grpc',
      'rpc.service': 'sluice.v1.TaskService',
      'rpc.method': 'ListTasks',
      'rpc.grpc.status_code': 0,
    });
    assert.equal(rpc.status.code, SpanStatusCode.UNSET);
  });

  it('starts a trace of its own when the caller sends none', async () => {
    assert.equal(await call(client, 'ListTasks', new grpc.Metadata()), grpc.status.OK);
    const rpc = named('sluice.v1.TaskService/ListTasks');
    assert.equal(rpc.parentSpanContext, undefined);
    assert.notEqual(rpc.spanContext().traceId, CALLER_TRACE_ID);
    assert.equal(named('handler.work').parentSpanContext?.spanId, rpc.spanContext().spanId);
  });

  it('starts a trace of its own from a malformed traceparent', async () => {
    const metadata = new grpc.Metadata();
    metadata.set('traceparent', 'not-a-traceparent');
    assert.equal(await call(client, 'ListTasks', metadata), grpc.status.OK);
    assert.equal(named('sluice.v1.TaskService/ListTasks').parentSpanContext, undefined);
  });

  it("records the status code; only the server's own failures are errors", async () => {
    assert.equal(await call(client, 'GetTask', new grpc.Metadata()), grpc.status.NOT_FOUND);
    assert.equal(await call(client, 'CreateTask', new grpc.Metadata()), grpc.status.INTERNAL);
    assert.equal(await call(client, 'PauseTask', new grpc.Metadata()), grpc.status.UNIMPLEMENTED);
    const get = named('sluice.v1.TaskService/GetTask');
    assert.equal(get.attributes['rpc.grpc.status_code'], grpc.status.NOT_FOUND);
    assert.equal(get.status.code, SpanStatusCode.UNSET);
    const create = named('sluice.v1.TaskService/CreateTask');
    assert.equal(create.attributes['rpc.grpc.status_code'], grpc.status.INTERNAL);
    assert.equal(create.status.code, SpanStatusCode.ERROR);
    const pause = named('sluice.v1.TaskService/PauseTask');
    assert.equal(pause.status.code, SpanStatusCode.ERROR);
  });
});

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import {
  InMemorySpanExporter,
  SamplingDecision,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT,
  DEFAULT_BSP_SCHEDULE_DELAY_MS,
  createSampler,
  createSpanProcessors,
  traceExportConfigFromEnv,
  type Environment,
} from './otlp-export.js';
import { startTracing, traceparentOfActiveSpan, withSpan } from './tracing.js';

const config = (env: Environment) => traceExportConfigFromEnv(env, 'sluice-test');

describe('traceExportConfigFromEnv', () => {
  it('exports nothing without an endpoint or exporter variable', () => {
    assert.deepEqual(config({}), {
      disabled: false,
      serviceName: 'sluice-test',
      resourceAttributes: {},
      exporters: [],
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      scheduleDelayMs: DEFAULT_BSP_SCHEDULE_DELAY_MS,
      attributeValueLengthLimit: DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT,
    });
  });

  it('reads the attribute value length limit, the span variable over the general one', () => {
    assert.equal(
      config({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '100' }).attributeValueLengthLimit,
      100,
    );
    assert.equal(
      config({
        OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '100',
        OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT: '200',
      }).attributeValueLengthLimit,
      200,
    );
    assert.equal(
      config({ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: 'long' }).attributeValueLengthLimit,
      DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT,
    );
  });

  it('exports over OTLP/HTTP to <endpoint>/v1/traces when an endpoint is set', () => {
    const read = config({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=acme,authorization=Bearer%20abc',
    });
    assert.deepEqual(read.exporters, [
      {
        kind: 'otlp',
        protocol: 'http/protobuf',
        url: 'http://127.0.0.1:4318/v1/traces',
        headers: { 'x-tenant': 'acme', authorization: 'Bearer abc' },
      },
    ]);
  });

  it('uses the traces endpoint as is, and the traces variables over the general ones', () => {
    const read = config({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://general:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom/path',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_HEADERS: 'a=1,b=2',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'b=3',
    });
    assert.deepEqual(read.exporters, [
      {
        kind: 'otlp',
        protocol: 'http/protobuf',
        url: 'http://traces:9999/custom/path',
        headers: { a: '1', b: '3' },
      },
    ]);
  });

  it('exports over gRPC to the endpoint itself', () => {
    const read = config({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4317',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    });
    assert.deepEqual(read.exporters, [
      { kind: 'otlp', protocol: 'grpc', url: 'http://jaeger:4317', headers: {} },
    ]);
  });

  it('uses the specification default endpoints when only OTEL_TRACES_EXPORTER=otlp is set', () => {
    assert.deepEqual(config({ OTEL_TRACES_EXPORTER: 'otlp' }).exporters, [
      {
        kind: 'otlp',
        protocol: 'http/protobuf',
        url: 'http://localhost:4318/v1/traces',
        headers: {},
      },
    ]);
    const grpc = config({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' });
    assert.deepEqual(grpc.exporters, [
      { kind: 'otlp', protocol: 'grpc', url: 'http://localhost:4317', headers: {} },
    ]);
  });

  it('honours none and console, and a list of exporters', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    assert.deepEqual(config({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).exporters, []);
    assert.deepEqual(config({ ...endpoint, OTEL_TRACES_EXPORTER: 'console' }).exporters, [
      { kind: 'console' },
    ]);
    const both = config({ ...endpoint, OTEL_TRACES_EXPORTER: 'console, otlp, bogus' });
    assert.deepEqual(
      both.exporters.map((e) => e.kind),
      ['console', 'otlp'],
    );
  });

  it('reads the service name, the SDK switch and the batch delay', () => {
    const read = config({
      OTEL_SERVICE_NAME: 'renamed',
      OTEL_SDK_DISABLED: 'TRUE',
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    assert.equal(read.serviceName, 'renamed');
    assert.equal(read.disabled, true);
    assert.equal(read.scheduleDelayMs, 200);
    assert.equal(config({ OTEL_SDK_DISABLED: 'false' }).disabled, false);
    assert.equal(
      config({ OTEL_BSP_SCHEDULE_DELAY: 'soon' }).scheduleDelayMs,
      DEFAULT_BSP_SCHEDULE_DELAY_MS,
    );
  });

  it('falls back to http/protobuf for an unknown protocol', () => {
    const read = config({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    });
    assert.equal(read.exporters[0]?.kind === 'otlp' && read.exporters[0].protocol, 'http/protobuf');
  });

  const samplers: Array<[Environment, string, number]> = [
    [{}, 'parentbased_always_on', 1],
    [{ OTEL_TRACES_SAMPLER: 'always_off' }, 'always_off', 1],
    [
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' },
      'traceidratio',
      0.25,
    ],
    [
      { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      'parentbased_traceidratio',
      1,
    ],
    [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, 'parentbased_always_on', 1],
  ];
  for (const [env, sampler, ratio] of samplers) {
    it(`${JSON.stringify(env)} samples with ${sampler} (${ratio})`, () => {
      const read = config(env);
      assert.equal(read.sampler, sampler);
      assert.equal(read.samplerRatio, ratio);
    });
  }
});

describe('createSampler', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const decide = (name: Parameters<typeof createSampler>[0], parentSampled?: boolean) => {
    const parent =
      parentSampled === undefined
        ? ROOT_CONTEXT
        : trace.setSpanContext(ROOT_CONTEXT, {
            traceId,
            spanId: '00f067aa0ba902b7',
            traceFlags: parentSampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
            isRemote: true,
          });
    return createSampler(name).shouldSample(parent, traceId, 'span', SpanKind.INTERNAL, {}, [])
      .decision;
  };
  const { RECORD_AND_SAMPLED: SAMPLED, NOT_RECORD: DROPPED } = SamplingDecision;

  it('always_on and always_off ignore the parent', () => {
    assert.equal(decide({ sampler: 'always_on', samplerRatio: 1 }, false), SAMPLED);
    assert.equal(decide({ sampler: 'always_off', samplerRatio: 1 }, true), DROPPED);
  });

  it('traceidratio samples by trace id (0 drops all, 1 keeps all)', () => {
    assert.equal(decide({ sampler: 'traceidratio', samplerRatio: 0 }), DROPPED);
    assert.equal(decide({ sampler: 'traceidratio', samplerRatio: 1 }), SAMPLED);
  });

  it('parentbased_* follow a parent and use their root sampler without one', () => {
    assert.equal(decide({ sampler: 'parentbased_always_off', samplerRatio: 1 }, true), SAMPLED);
    assert.equal(decide({ sampler: 'parentbased_always_off', samplerRatio: 1 }), DROPPED);
    assert.equal(decide({ sampler: 'parentbased_always_on', samplerRatio: 1 }, false), DROPPED);
    assert.equal(decide({ sampler: 'parentbased_always_on', samplerRatio: 1 }), SAMPLED);
    assert.equal(decide({ sampler: 'parentbased_traceidratio', samplerRatio: 0 }), DROPPED);
  });
});

describe('createSpanProcessors', () => {
  it('makes one processor per exporter', async () => {
    const processors = createSpanProcessors(
      config({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318' }),
    );
    assert.equal(processors.length, 0);
    const grpc = createSpanProcessors(
      config({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      }),
    );
    assert.equal(grpc.length, 1);
    await Promise.all(grpc.map((p) => p.shutdown()));
  });
});

/** A loopback OTLP/HTTP endpoint that records what it receives (not decoded: that is another test's). */
interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
}

describe('startTracing with OTLP/HTTP export to a loopback receiver', () => {
  let server: Server;
  let endpoint: string;
  const received: Received[] = [];
  let waiters: Array<() => void> = [];

  before(async () => {
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({
          method: request.method ?? '',
          url: request.url ?? '',
          headers: request.headers,
          bytes: Buffer.concat(chunks).length,
        });
        response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
        for (const wake of waiters) wake();
        waiters = [];
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Resolves once `count` requests have arrived (the test's own timeout bounds the wait). */
  const requests = async (count: number): Promise<Received[]> => {
    while (received.length < count) await new Promise<void>((resolve) => waiters.push(resolve));
    return received;
  };

  it('posts spans on its schedule to /v1/traces as protobuf, with the configured headers', async () => {
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-sluice-test=yes',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
    });
    try {
      const traceparent = await withSpan(tracing.tracer('test'), 'exported', {}, () =>
        traceparentOfActiveSpan(),
      );
      assert.match(traceparent ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      // Not flushed by a shutdown: the batch schedule sends it.
      const [first] = await requests(1);
      assert.equal(first?.method, 'POST');
      assert.equal(first?.url, '/v1/traces');
      assert.equal(first?.headers['content-type'], 'application/x-protobuf');
      assert.equal(first?.headers['x-sluice-test'], 'yes');
      assert.ok((first?.bytes ?? 0) > 0, 'the request carries a payload');
    } finally {
      await tracing.shutdown();
    }
  });

  it('flushes buffered spans on shutdown', async () => {
    const before = received.length;
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces`,
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      },
    });
    await withSpan(tracing.tracer('test'), 'buffered', {}, () => undefined);
    assert.equal(received.length, before, 'nothing is sent before the schedule or a shutdown');
    await tracing.shutdown();
    assert.equal(received.length, before + 1);
    assert.equal(received[before]?.url, '/v1/traces');
  });

  it('exports nothing and creates no ids when OTEL_SDK_DISABLED=true', async () => {
    const before = received.length;
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: endpoint },
    });
    const traceparent = await withSpan(tracing.tracer('test'), 'off', {}, () =>
      traceparentOfActiveSpan(),
    );
    assert.equal(traceparent, undefined);
    assert.equal(trace.getActiveSpan(), undefined);
    await tracing.shutdown();
    assert.equal(received.length, before);
    // Nothing was registered: tracing can be started normally afterwards.
    const next = startTracing({ serviceName: 'sluice-test', env: {} });
    await next.shutdown();
  });

  it('takes the service name from OTEL_SERVICE_NAME', async () => {
    const memory = new InMemorySpanExporter();
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: { OTEL_SERVICE_NAME: 'renamed-by-env' },
      spanProcessors: [new SimpleSpanProcessor(memory)],
    });
    try {
      await withSpan(tracing.tracer('test'), 'named', {}, () => undefined);
      const [span] = memory.getFinishedSpans();
      assert.equal(span?.resource.attributes['service.name'], 'renamed-by-env');
    } finally {
      await tracing.shutdown();
    }
  });

  it('adds the attributes of OTEL_RESOURCE_ATTRIBUTES to the resource (deploy/compose.yaml sets them)', async () => {
    const memory = new InMemorySpanExporter();
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: {
        OTEL_RESOURCE_ATTRIBUTES:
          'service.namespace=sluice, deployment.environment=compose,team=a%20b,service.name=other',
        OTEL_SERVICE_NAME: 'renamed-by-env',
      },
      spanProcessors: [new SimpleSpanProcessor(memory)],
    });
    try {
      await withSpan(tracing.tracer('test'), 'attributed', {}, () => undefined);
      const [span] = memory.getFinishedSpans();
      assert.equal(span?.resource.attributes['service.namespace'], 'sluice');
      assert.equal(span?.resource.attributes['deployment.environment'], 'compose');
      assert.equal(span?.resource.attributes['team'], 'a b');
      // OTEL_SERVICE_NAME wins over a service.name among the attributes, as the specification says.
      assert.equal(span?.resource.attributes['service.name'], 'renamed-by-env');
    } finally {
      await tracing.shutdown();
    }
    const named = config({ OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes' });
    assert.equal(named.serviceName, 'from-attributes');
    assert.deepEqual(named.resourceAttributes, {});
  });

  it('samples by OTEL_TRACES_SAMPLER', async () => {
    const tracing = startTracing({
      serviceName: 'sluice-test',
      env: { OTEL_TRACES_SAMPLER: 'always_off' },
    });
    try {
      const traceparent = await withSpan(tracing.tracer('test'), 'dropped', {}, () =>
        traceparentOfActiveSpan(),
      );
      // Still propagated (so the task keeps a trace id), but marked not sampled.
      assert.match(traceparent ?? '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    } finally {
      await tracing.shutdown();
    }
  });
});

/**
 * The OTLP receiver reads what OpenTelemetry JS's own OTLP/HTTP protobuf exporter sends (the
 * exporter the services use), and OTLP JSON, and refuses what is not OTLP.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { startTracing, type TracingOptions } from '@sluice/telemetry';
import { encodeProtobufRequest, startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.js';

type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];

// `@opentelemetry/api`'s `SpanKind.SERVER`, `SpanKind.CLIENT` and `SpanStatusCode.ERROR` (the test
// package reaches the API only through `@sluice/telemetry`).
const SERVER = 1;
const CLIENT = 2;
const ERROR = 2;

/**
 * The SDK's exporter and span processor, resolved from `@sluice/telemetry`'s own dependencies
 * (the test package depends on the SDK only through it).
 */
const fromTelemetry = createRequire(fileURLToPath(import.meta.resolve('@sluice/telemetry')));
const { OTLPTraceExporter } = fromTelemetry('@opentelemetry/exporter-trace-otlp-proto') as {
  OTLPTraceExporter: new (config: { url: string }) => object;
};
const { SimpleSpanProcessor } = fromTelemetry('@opentelemetry/sdk-trace-base') as {
  SimpleSpanProcessor: new (exporter: object) => SpanProcessor;
};

describe('OTLP receiver', () => {
  let receiver: OtlpReceiver;
  before(async () => {
    receiver = await startOtlpReceiver();
  });
  after(() => receiver.stop());

  it('decodes the spans OpenTelemetry JS exports over OTLP/HTTP protobuf', async () => {
    const tracing = startTracing({
      serviceName: 'receiver-test',
      spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: receiver.tracesUrl }))],
    });
    const tracer = tracing.tracer('@sluice/receiver-test', '1.0.0');
    const ids = tracer.startActiveSpan('parent', { kind: SERVER }, (parent) => {
      const child = tracer.startSpan('child', {
        kind: CLIENT,
        attributes: {
          'a.string': 'text',
          'a.int': 42,
          'a.double': 1.5,
          'a.bool': false,
          'a.strings': ['x', 'y'],
        },
        links: [{ context: parent.spanContext(), attributes: { why: 'test' } }],
      });
      child.addEvent('happened', { 'event.count': 2 });
      child.setStatus({ code: ERROR, message: 'it broke' });
      child.end();
      parent.end();
      return {
        traceId: parent.spanContext().traceId,
        parent: parent.spanContext().spanId,
        child: child.spanContext().spanId,
      };
    });
    await tracing.shutdown();

    const spans = await receiver.waitFor((all) => all.some((s) => s.spanId === ids.parent));
    const child = spans.find((s) => s.spanId === ids.child);
    const parent = spans.find((s) => s.spanId === ids.parent);
    assert.ok(child && parent);
    assert.equal(parent.traceId, ids.traceId);
    assert.equal(parent.parentSpanId, undefined);
    assert.equal(parent.kind, 'server');
    assert.equal(parent.status.code, 'unset');
    assert.deepEqual(
      {
        traceId: child.traceId,
        parentSpanId: child.parentSpanId,
        name: child.name,
        kind: child.kind,
        serviceName: child.serviceName,
        scope: child.scope,
        attributes: child.attributes,
        events: child.events.map((e) => ({ name: e.name, attributes: e.attributes })),
        links: child.links,
        status: child.status,
      },
      {
        traceId: ids.traceId,
        parentSpanId: ids.parent,
        name: 'child',
        kind: 'client',
        serviceName: 'receiver-test',
        scope: '@sluice/receiver-test',
        attributes: {
          'a.string': 'text',
          'a.int': 42,
          'a.double': 1.5,
          'a.bool': false,
          'a.strings': ['x', 'y'],
        },
        events: [{ name: 'happened', attributes: { 'event.count': 2 } }],
        links: [{ traceId: ids.traceId, spanId: ids.parent, attributes: { why: 'test' } }],
        status: { code: 'error', message: 'it broke' },
      },
    );
    assert.ok(child.endTimeUnixNano >= child.startTimeUnixNano);
    assert.ok(child.startTimeUnixNano > 1_600_000_000_000_000_000n, 'nanoseconds since 1970');
    assert.deepEqual(receiver.errors, []);
  });

  it('reads OTLP JSON, with hex ids and camelCase names', async () => {
    const body = {
      resourceSpans: [
        {
          resource: {
            attributes: [{ key: 'service.name', value: { stringValue: 'json-service' } }],
          },
          scopeSpans: [
            {
              scope: { name: 'json-scope' },
              spans: [
                {
                  traceId: '5B8EFFF798038103D269B633813FC60C',
                  spanId: 'EEE19B7EC3C1B174',
                  parentSpanId: 'EEE19B7EC3C1B173',
                  name: 'json-span',
                  kind: 3,
                  startTimeUnixNano: '1544712660000000000',
                  endTimeUnixNano: '1544712661000000000',
                  attributes: [
                    { key: 'n', value: { intValue: '7' } },
                    {
                      key: 'nested',
                      value: {
                        kvlistValue: { values: [{ key: 'k', value: { boolValue: true } }] },
                      },
                    },
                  ],
                  events: [{ name: 'e', timeUnixNano: '1544712660500000000', attributes: [] }],
                  status: { code: 2, message: 'bad' },
                },
              ],
            },
          ],
        },
      ],
    };
    const response = await fetch(receiver.tracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(response.status, 200);
    const spans = await receiver.waitFor((all) => all.some((s) => s.name === 'json-span'));
    const span = spans.find((s) => s.name === 'json-span');
    assert.deepEqual(
      span && {
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId,
        kind: span.kind,
        serviceName: span.serviceName,
        scope: span.scope,
        start: span.startTimeUnixNano,
        attributes: span.attributes,
        events: span.events,
        status: span.status,
      },
      {
        traceId: '5b8efff798038103d269b633813fc60c',
        spanId: 'eee19b7ec3c1b174',
        parentSpanId: 'eee19b7ec3c1b173',
        kind: 'client',
        serviceName: 'json-service',
        scope: 'json-scope',
        start: 1544712660000000000n,
        attributes: { n: 7, nested: { k: true } },
        events: [{ name: 'e', timeUnixNano: 1544712660500000000n, attributes: {} }],
        status: { code: 'error', message: 'bad' },
      },
    );
  });

  it('reads a gzip-compressed protobuf request and answers an empty response', async () => {
    const id = (hex: string) => Buffer.from(hex, 'hex');
    const payload = encodeProtobufRequest({
      resource_spans: [
        {
          scope_spans: [
            {
              spans: [
                {
                  trace_id: id('0af7651916cd43dd8448eb211c80319c'),
                  span_id: id('b7ad6b7169203331'),
                  name: 'zipped',
                  kind: 4,
                },
              ],
            },
          ],
        },
      ],
    });
    const response = await fetch(receiver.tracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' },
      body: gzipSync(payload),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), 'application/x-protobuf');
    assert.equal((await response.arrayBuffer()).byteLength, 0, 'an empty message: full success');
    const spans = await receiver.waitFor((all) => all.some((s) => s.name === 'zipped'));
    const span = spans.find((s) => s.name === 'zipped');
    assert.deepEqual(span && [span.traceId, span.spanId, span.kind, span.serviceName], [
      '0af7651916cd43dd8448eb211c80319c',
      'b7ad6b7169203331',
      'producer',
      undefined,
    ]);
  });

  it('refuses what is not an OTLP trace export, and says so', async () => {
    const before = receiver.errors.length;
    const post = (path: string, type: string, body: Uint8Array | string) =>
      fetch(`${receiver.endpoint}${path}`, {
        method: 'POST',
        headers: { 'content-type': type },
        body,
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    assert.equal(await post('/v1/traces', 'text/plain', 'hello'), 415);
    assert.equal(
      await post('/v1/traces', 'application/x-protobuf', new Uint8Array([0x0a, 0xff])),
      400,
    );
    assert.equal(await post('/v1/traces', 'application/json', '{not json'), 400);
    assert.equal(await post('/v1/metrics', 'application/x-protobuf', new Uint8Array()), 404);
    assert.equal(receiver.errors.length, before + 4);
  });

  it('waitFor gives up with what arrived', async () => {
    await assert.rejects(
      receiver.waitFor((all) => all.some((s) => s.name === 'never'), 50),
      /did not arrive within 50 ms; \d+ received: .*json-service: json-span/,
    );
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SpanStatusCode, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_TASK_ID } from './attributes.js';
import { DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT } from './otlp-export.js';
import {
  contextFromTraceparent,
  startTracing,
  traceIdOf,
  traceparentOfActiveSpan,
  withSpan,
} from './tracing.js';
import type { Tracing } from './tracing.js';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

describe('tracing helpers without a started SDK', () => {
  it('run the function and report no trace context', async () => {
    const result = await withSpan(trace.getTracer('noop'), 'work', {}, () => {
      assert.equal(traceparentOfActiveSpan(), undefined);
      return 42;
    });
    assert.equal(result, 42);
  });
});

describe('startTracing', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  before(() => {
    tracing = startTracing({
      serviceName: 'tracing-test',
      serviceVersion: '1.2.3',
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
  });
  after(() => tracing.shutdown());

  function finished(name: string) {
    const span = exporter.getFinishedSpans().find((s) => s.name === name);
    assert.ok(span, `span ${name} was not finished`);
    return span;
  }

  it('refuses to start twice in one process', () => {
    assert.throws(() => startTracing({ serviceName: 'second' }), /already started/);
  });

  it('withSpan returns the result and ends an OK span with the attributes and resource', async () => {
    const result = await withSpan(
      tracing.tracer('test'),
      'ok-span',
      { [ATTR_TASK_ID]: 'task-1' },
      async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return 'done';
      },
    );
    assert.equal(result, 'done');
    const span = finished('ok-span');
    assert.equal(span.ended, true);
    assert.equal(span.status.code, SpanStatusCode.UNSET);
    assert.equal(span.attributes[ATTR_TASK_ID], 'task-1');
    assert.equal(span.resource.attributes['service.name'], 'tracing-test');
    assert.equal(span.resource.attributes['service.version'], '1.2.3');
  });

  it('withSpan rethrows a thrown value that cannot be made a string, and ends the span', async () => {
    const bare: unknown = Object.assign(Object.create(null) as object, { reason: 'no prototype' });
    const sly = {
      toString() {
        throw new Error('toString refused');
      },
    };
    for (const [name, thrown] of [
      ['bare-throw', bare],
      ['sly-throw', sly],
    ] as const) {
      await assert.rejects(
        withSpan(tracing.tracer('test'), name, {}, () => {
          throw thrown;
        }),
        (error) => error === thrown,
      );
      const span = finished(name);
      assert.equal(span.ended, true);
      assert.equal(span.status.code, SpanStatusCode.ERROR);
      assert.equal(span.status.message, '[object Object]');
    }
  });

  it('withSpan records an exception, sets ERROR, ends the span and rethrows', async () => {
    const failure = new Error('upstream broke');
    await assert.rejects(
      withSpan(tracing.tracer('test'), 'failing-span', {}, () => {
        throw failure;
      }),
      (error) => error === failure,
    );
    const span = finished('failing-span');
    assert.equal(span.ended, true);
    assert.equal(span.status.code, SpanStatusCode.ERROR);
    assert.equal(span.status.message, 'upstream broke');
    const event = span.events.find((e) => e.name === 'exception');
    assert.equal(event?.attributes?.['exception.message'], 'upstream broke');
  });

  it('bounds what a span keeps of a huge error: status, exception message and stack', async () => {
    // An HTTP error quoting a whole response body, as a handler may throw.
    const body = `upstream answered 500: ${'x'.repeat(1_000_000)}`;
    await assert.rejects(
      withSpan(tracing.tracer('test'), 'huge-error', {}, (span) => {
        span.setAttribute('sluice.test.body', body);
        throw new Error(body);
      }),
    );
    const span = finished('huge-error');
    const limit = DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT;
    // Compared by length: a failure would print the megabyte.
    const kept = (value: unknown) => (typeof value === 'string' ? value.length : value);
    const event = span.events.find((e) => e.name === 'exception');
    assert.equal(span.status.code, SpanStatusCode.ERROR);
    assert.equal(kept(span.status.message), limit);
    assert.ok(body.startsWith(span.status.message ?? '-'));
    assert.equal(kept(event?.attributes?.['exception.message']), limit);
    assert.equal(kept(event?.attributes?.['exception.stacktrace']), limit);
    assert.equal(kept(span.attributes['sluice.test.body']), limit);
  });

  it('scrubs credentials an error quotes from the status and the exception, as logs do', async () => {
    const secret = 'span-secret-0123456789abcdef';
    const failure = new Error(
      `GET https://tool.example/search?q=x&api_key=${secret} answered 401 ` +
        `(Authorization: Bearer ${secret}; postgres://sluice:${secret}@db:5432/sluice)`,
    );
    await assert.rejects(
      withSpan(tracing.tracer('test'), 'quoting-error', {}, () => {
        throw failure;
      }),
    );
    const span = finished('quoting-error');
    const event = span.events.find((e) => e.name === 'exception');
    const texts = [
      span.status.message,
      event?.attributes?.['exception.message'],
      event?.attributes?.['exception.stacktrace'],
    ];
    for (const text of texts) {
      assert.ok(typeof text === 'string', String(text));
      assert.ok(!text.includes(secret), text);
      assert.ok(text.includes('api_key=[redacted] answered 401'), text);
    }
  });

  it('nests spans and keeps the active span across awaits', async () => {
    const tracer = tracing.tracer('test');
    await withSpan(tracer, 'outer', {}, async (outer) => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      assert.equal(trace.getActiveSpan(), outer);
      await withSpan(tracer, 'inner', {}, () => undefined);
    });
    const outer = finished('outer');
    const inner = finished('inner');
    assert.equal(inner.spanContext().traceId, outer.spanContext().traceId);
    assert.equal(inner.parentSpanContext?.spanId, outer.spanContext().spanId);
  });

  it('stores a traceparent and continues the trace from it later', async () => {
    const tracer = tracing.tracer('test');
    const stored = await withSpan(tracer, 'create', {}, () => traceparentOfActiveSpan());
    assert.ok(stored !== undefined);
    const match = TRACEPARENT.exec(stored);
    assert.ok(match, `not a traceparent: ${stored}`);
    const create = finished('create');
    assert.equal(match[1], create.spanContext().traceId);
    assert.equal(match[2], create.spanContext().spanId);
    assert.equal(traceIdOf(stored), create.spanContext().traceId);

    // Later, in another unit of work that has an unrelated span active.
    await withSpan(tracer, 'unrelated', {}, () =>
      context.with(contextFromTraceparent(stored), () =>
        withSpan(tracer, 'resume', {}, () => undefined),
      ),
    );
    const resume = finished('resume');
    assert.equal(resume.spanContext().traceId, create.spanContext().traceId);
    assert.equal(resume.parentSpanContext?.spanId, create.spanContext().spanId);
  });

  it('starts a new trace from a malformed traceparent', async () => {
    const tracer = tracing.tracer('test');
    await context.with(contextFromTraceparent('not-a-traceparent'), () =>
      withSpan(tracer, 'fresh', {}, () => undefined),
    );
    const fresh = finished('fresh');
    assert.equal(fresh.parentSpanContext, undefined);
    assert.match(fresh.spanContext().traceId, /^[0-9a-f]{32}$/);
  });

  it('has no traceparent outside a span', () => {
    assert.equal(traceparentOfActiveSpan(), undefined);
  });
});

describe('startTracing with OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT', () => {
  it('holds attribute values and the status message to it, a surrogate pair whole', async () => {
    const exporter = new InMemorySpanExporter();
    const tracing = startTracing({
      serviceName: 'limits',
      spanProcessors: [new SimpleSpanProcessor(exporter)],
      env: { OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: '10' },
    });
    try {
      // The 10th character is the first half of an emoji's surrogate pair.
      const message = `${'a'.repeat(9)}😀 and more`;
      await assert.rejects(
        withSpan(tracing.tracer('t'), 'limited', {}, (span) => {
          span.setAttribute('sluice.test.long', 'b'.repeat(50));
          throw new Error(message);
        }),
      );
      const [span] = exporter.getFinishedSpans();
      assert.equal(span?.status.message, 'a'.repeat(9));
      assert.equal(span?.attributes['sluice.test.long'], 'b'.repeat(10));
    } finally {
      await tracing.shutdown();
    }
  });
});

describe('startTracing after shutdown', () => {
  it('can start again, and shutdown is idempotent', async () => {
    const first = startTracing({ serviceName: 'first' });
    await first.shutdown();
    await first.shutdown();
    const second = startTracing({ serviceName: 'second' });
    try {
      const traceparent = await withSpan(second.tracer('t'), 's', {}, () =>
        traceparentOfActiveSpan(),
      );
      assert.match(traceparent ?? '', TRACEPARENT);
    } finally {
      await second.shutdown();
    }
    assert.equal(traceparentOfActiveSpan(), undefined);
  });
});

describe('traceIdOf', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const cases: Array<[string, string | undefined]> = [
    [`00-${traceId}-00f067aa0ba902b7-01`, traceId],
    [`00-${traceId}-00f067aa0ba902b7-00`, traceId],
    [` 00-${traceId}-00f067aa0ba902b7-01 `, traceId],
    [`01-${traceId}-00f067aa0ba902b7-01-future`, traceId],
    [`00-${traceId}-00f067aa0ba902b7-01-extra`, undefined],
    [`ff-${traceId}-00f067aa0ba902b7-01`, undefined],
    [`00-${traceId.toUpperCase()}-00f067aa0ba902b7-01`, undefined],
    [`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, undefined],
    [`00-${traceId}-${'0'.repeat(16)}-01`, undefined],
    [`00-${traceId.slice(1)}-00f067aa0ba902b7-01`, undefined],
    ['', undefined],
    ['garbage', undefined],
  ];
  for (const [input, expected] of cases) {
    it(`${JSON.stringify(input)} → ${String(expected)}`, () => {
      assert.equal(traceIdOf(input), expected);
    });
  }
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { context, propagation, trace, TraceFlags } from '@opentelemetry/api';
import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { createBusCatalog } from './catalog.js';
import { publishDurable } from './publish.js';
import { ensureTopology } from './topology.js';
import { extractTraceContext, injectTraceContext } from './trace-headers.js';
import { natsUrl, uniquePrefix } from './testing/index.js';

/**
 * A minimal W3C `traceparent` propagator, standing in for the one the telemetry package registers
 * (`@opentelemetry/core` is not a dependency of this package).
 */
class TraceparentPropagator implements TextMapPropagator {
  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    const span = trace.getSpanContext(ctx);
    if (span === undefined) return;
    const flags = span.traceFlags.toString(16).padStart(2, '0');
    setter.set(carrier, 'traceparent', `00-${span.traceId}-${span.spanId}-${flags}`);
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const raw = getter.get(carrier, 'traceparent');
    const value = Array.isArray(raw) ? raw[0] : raw;
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value ?? '');
    if (m === null) return ctx;
    return trace.setSpanContext(ctx, {
      traceId: m[1]!,
      spanId: m[2]!,
      traceFlags: parseInt(m[3]!, 16),
      isRemote: true,
    });
  }

  fields(): string[] {
    return ['traceparent'];
  }
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

function activeContext(): Context {
  return trace.setSpanContext(context.active(), {
    traceId: TRACE_ID,
    spanId: SPAN_ID,
    traceFlags: TraceFlags.SAMPLED,
  });
}

describe('trace headers', () => {
  const catalog = createBusCatalog(uniquePrefix('trace'));
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  before(async () => {
    propagation.setGlobalPropagator(new TraceparentPropagator());
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
    await ensureTopology(jsm, catalog);
  });

  after(async () => {
    propagation.disable();
    for (const name of Object.values(catalog.streams)) {
      await jsm.streams.delete(name).catch(() => false);
    }
    await nc.close();
  });

  it('injects the given context into new or existing headers', () => {
    const h = injectTraceContext(undefined, activeContext());
    assert.equal(h.get('traceparent'), `00-${TRACE_ID}-${SPAN_ID}-01`);
    const existing = headers();
    existing.set('x-other', '1');
    assert.equal(injectTraceContext(existing, activeContext()), existing);
    assert.equal(existing.get('traceparent'), `00-${TRACE_ID}-${SPAN_ID}-01`);
    assert.equal(existing.get('x-other'), '1');
  });

  it('carries the trace through JetStream: the stored message yields it as a remote parent', async () => {
    const js = jetstream(nc);
    const subject = catalog.subjects.events('acme', 'task-1');
    await publishDurable(js, subject, new Uint8Array([123, 125]), {
      msgID: 'task-1:e1',
      headers: injectTraceContext(undefined, activeContext()),
    });
    const stored = await jsm.streams.getMessage(catalog.streams.events, { last_by_subj: subject });
    assert.ok(stored);
    const parent = trace.getSpanContext(extractTraceContext(stored.header, context.active()));
    assert.deepEqual(parent, {
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
  });

  it('leaves the context alone for missing or malformed headers', () => {
    const base = context.active();
    assert.equal(extractTraceContext(undefined, base), base);
    assert.equal(trace.getSpanContext(extractTraceContext(headers(), base)), undefined);
    const bad = headers();
    bad.set('traceparent', 'garbage');
    assert.equal(trace.getSpanContext(extractTraceContext(bad, base)), undefined);
  });
});

/**
 * W3C trace context (`traceparent`, `tracestate`) in NATS message headers.
 *
 * There is no OpenTelemetry instrumentation for nats.js, so publishers inject the active context
 * into the headers and consumers extract it as the parent of their span (NATS-NOTES.md §9). This uses
 * the global propagator only: the telemetry package registers it at start; without one, both
 * functions are harmless no-ops.
 */
import { context, propagation } from '@opentelemetry/api';
import type { Context, TextMapGetter, TextMapSetter } from '@opentelemetry/api';
import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';

const setter: TextMapSetter<MsgHdrs> = {
  set(carrier, key, value) {
    carrier.set(key, value);
  },
};

const getter: TextMapGetter<MsgHdrs | undefined> = {
  get(carrier, key) {
    // MsgHdrs.get answers "" for a missing header; the propagator wants undefined.
    const value = carrier?.get(key);
    return value === undefined || value === '' ? undefined : value;
  },
  keys(carrier) {
    return carrier?.keys() ?? [];
  },
};

/**
 * Writes the trace context of `ctx` (default: the active context) into `into` (default: new
 * headers), and returns the headers.
 */
export function injectTraceContext(
  into: MsgHdrs = headers(),
  ctx: Context = context.active(),
): MsgHdrs {
  propagation.inject(ctx, into, setter);
  return into;
}

/**
 * Reads the trace context from a message's headers into a copy of `ctx` (default: the active
 * context). Use the result as the parent: `context.with(extractTraceContext(m.headers), …)`. Missing
 * or malformed headers give `ctx` unchanged.
 */
export function extractTraceContext(
  from: MsgHdrs | undefined,
  ctx: Context = context.active(),
): Context {
  return propagation.extract(ctx, from, getter);
}

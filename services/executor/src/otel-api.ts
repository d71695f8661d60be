/**
 * The `@opentelemetry/api` entry points the step runner needs beyond `@sluice/telemetry`'s helpers:
 * `trace.getTracer` and `trace.getActiveSpan`, and `SpanStatusCode`.
 *
 * The executor does not list `@opentelemetry/api` as a dependency yet, so it is loaded from where
 * `@sluice/telemetry` resolves it. The API keeps its state (provider, context manager) in one
 * process-wide registry, so this copy sees exactly what `startTracing` registered. Once the
 * executor depends on `@opentelemetry/api` directly, this module becomes
 * `export { SpanStatusCode, trace } from '@opentelemetry/api'`.
 */
import { createRequire } from 'node:module';
import type { contextFromTraceparent, withSpan } from '@sluice/telemetry';

/** An OpenTelemetry context. */
export type OtelContext = ReturnType<typeof contextFromTraceparent>;
/** An OpenTelemetry tracer. */
export type OtelTracer = Parameters<typeof withSpan>[0];
/** An OpenTelemetry span. */
export type OtelSpan = Parameters<Parameters<typeof withSpan>[3]>[0];

/** The status code of a span. */
export type OtelStatusCode = Parameters<OtelSpan['setStatus']>[0]['code'];

interface OtelApi {
  readonly SpanStatusCode: { readonly ERROR: OtelStatusCode };
  readonly trace: {
    getTracer(name: string, version?: string): OtelTracer;
    getActiveSpan(): OtelSpan | undefined;
  };
}

const api = createRequire(import.meta.resolve('@sluice/telemetry'))(
  '@opentelemetry/api',
) as OtelApi;

/** `SpanStatusCode` of `@opentelemetry/api`. */
export const SpanStatusCode = api.SpanStatusCode;
/** `trace` of `@opentelemetry/api`. */
export const trace = api.trace;

/**
 * Tracing: the SDK setup a service's `main.ts` calls once, and the helpers libraries use.
 *
 * Only {@link startTracing} touches the SDK; everything else goes through `@opentelemetry/api`, so
 * a library that calls {@link withSpan} or {@link traceparentOfActiveSpan} works (as a no-op) in a
 * process that never started tracing, such as a unit test.
 *
 * One task is one trace, even across hours of waiting: the gateway stores the `traceparent` of its
 * create span on the task row ({@link traceparentOfActiveSpan}) and whoever works on the task later
 * continues that trace from it ({@link contextFromTraceparent}).
 */
import {
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isValidSpanId,
  isValidTraceId,
  propagation,
  trace,
} from '@opentelemetry/api';
import type { Attributes, Context, Link, Span, SpanKind, Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { cutText, describeThrown, reportedError } from './errors.js';
import { scrubSecrets } from './logger.js';
import {
  createSampler,
  createSpanProcessors,
  traceExportConfigFromEnv,
  type Environment,
} from './otlp-export.js';

/** Options of {@link startTracing}. */
export interface TracingOptions {
  /**
   * The `service.name` resource attribute, e.g. `sluice-gateway`; how Jaeger groups the spans.
   * `OTEL_SERVICE_NAME` overrides it; `OTEL_RESOURCE_ATTRIBUTES` adds attributes of its own.
   */
  serviceName: string;
  /** The `service.version` resource attribute; omitted when not given. */
  serviceVersion?: string;
  /**
   * Where finished spans go besides the exporters the environment configures (see
   * `traceExportConfigFromEnv`), e.g. an in-memory exporter in a test. With neither, spans are
   * still created, sampled and propagated (so ids reach logs, messages and task rows), but
   * nothing leaves the process.
   */
  spanProcessors?: readonly SpanProcessor[];
  /** Where the `OTEL_*` variables are read from; default `process.env`. */
  env?: Environment;
}

/** The running tracing SDK of a process, returned by {@link startTracing}. */
export interface Tracing {
  /** A tracer named after the instrumented module, e.g. `@sluice/scheduler`. */
  tracer(name: string, version?: string): Tracer;
  /**
   * Flushes and shuts down the span processors and unregisters the global provider, context
   * manager and propagator, so tracing can be started again in the same process. Idempotent.
   */
  shutdown(): Promise<void>;
}

/**
 * Starts the tracing SDK of this process and registers it with `@opentelemetry/api`: a
 * `NodeTracerProvider`, the W3C trace-context propagator, and the provider's default context
 * manager, which keeps the active span in `AsyncLocalStorage` across `await`s.
 *
 * Export, sampling and the service name follow the standard `OTEL_*` variables
 * (`traceExportConfigFromEnv`: e.g. `OTEL_EXPORTER_OTLP_ENDPOINT` sends spans over OTLP to
 * Jaeger); `OTEL_SDK_DISABLED=true` starts nothing and returns a no-op. Call once, from a
 * service's start function; {@link Tracing.shutdown} flushes what is still buffered.
 *
 * @throws Error when tracing is already started in this process (shut the other one down first).
 */
export function startTracing(options: TracingOptions): Tracing {
  const config = traceExportConfigFromEnv(options.env ?? process.env, options.serviceName);
  if (config.disabled) return DISABLED;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      [ATTR_SERVICE_NAME]: config.serviceName,
      ...(options.serviceVersion === undefined
        ? {}
        : { [ATTR_SERVICE_VERSION]: options.serviceVersion }),
    }),
    sampler: createSampler(config),
    // Given here, the limit read from `env` is the one used: the SDK's own reading of the same
    // variables (from `process.env`) yields to it.
    spanLimits: { attributeValueLengthLimit: config.attributeValueLengthLimit },
    spanProcessors: [
      errorTextGuard(config.attributeValueLengthLimit),
      ...createSpanProcessors(config),
      ...(options.spanProcessors ?? []),
    ],
  });
  // `contextManager: undefined` asks for the default, AsyncLocalStorageContextManager.
  provider.register({ propagator: new W3CTraceContextPropagator(), contextManager: undefined });

  // The API refuses a second global provider without throwing; make that mistake loud.
  if (!isGlobalProvider(provider)) {
    // Nothing was registered; release the processors we were handed. Their errors are moot.
    provider.shutdown().catch(() => undefined);
    throw new Error('tracing is already started in this process');
  }

  let stopping: Promise<void> | undefined;
  return {
    tracer: (name, version) => provider.getTracer(name, version),
    shutdown: () => {
      stopping ??= (async () => {
        if (isGlobalProvider(provider)) {
          trace.disable();
          context.disable();
          propagation.disable();
        }
        await provider.shutdown();
      })();
      return stopping;
    },
  };
}

/** What {@link startTracing} returns under `OTEL_SDK_DISABLED=true`: the API's no-op tracers. */
const DISABLED: Tracing = {
  tracer: (name, version) => trace.getTracer(name, version),
  shutdown: () => Promise.resolve(),
};

/**
 * Makes what a span says of an error fit to export, as it ends, before any exporter sees it:
 *
 * - Credentials quoted in the text (a bearer token, a URL's password or `?api_key=`, an API key)
 *   are scrubbed from its status message and its exceptions' message and stack, as the logger
 *   scrubs them from log lines: the same error is logged and recorded on the span, and trace
 *   backends keep and show what they get as logs do.
 * - The status message is cut to `limit` characters: the SDK holds attribute values and event
 *   attributes to the `spanLimits`, but keeps a status message whole, and every `setStatus` of
 *   Sluice's spans (and of a handler's own) passes an error's message, of any length.
 */
function errorTextGuard(limit: number): SpanProcessor {
  return {
    onStart: () => undefined,
    onEnding(span) {
      for (const event of span.events) {
        if (event.name !== 'exception' || event.attributes === undefined) continue;
        for (const key of ['exception.message', 'exception.stacktrace']) {
          const text = event.attributes[key];
          // Cut again: a short secret's mark may be longer than the secret.
          if (typeof text === 'string') event.attributes[key] = cutText(scrubSecrets(text), limit);
        }
      }
      const { code, message } = span.status;
      if (message === undefined || message === '') return;
      const scrubbed = scrubSecrets(message);
      const bounded = cutText(scrubbed, limit);
      if (bounded !== message) span.setStatus({ code, message: bounded });
    },
    onEnd: () => undefined,
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
}

function isGlobalProvider(provider: NodeTracerProvider): boolean {
  const global = trace.getTracerProvider();
  return global instanceof ProxyTracerProvider && global.getDelegate() === provider;
}

/**
 * Runs `fn` inside a new span that is active for its duration (child of the active span, if any).
 * An exception is recorded on the span, which gets ERROR status, and rethrown; the span ends in
 * every case.
 *
 * @param tracer from {@link Tracing.tracer}, or `trace.getTracer(name)` in a library.
 * @param name what the span does, e.g. `scheduler.claim`.
 * @param attributes set at the start, so samplers see them; use the `ATTR_*` names.
 * @param fn receives the span to add events or attributes to.
 * @returns what `fn` returns.
 */
export async function withSpan<T>(
  tracer: Tracer,
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T> | T,
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      recordFailure(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Records what `fn` threw on its span: an exception event and ERROR status. An error that quotes
 * the statement and every parameter a query failed with — drizzle's `DrizzleQueryError`
 * (`Failed query: … params: …`, with `query`, `params`, and the driver's error as `cause`), which
 * any transaction run in the span may throw — is recorded as the driver's error, as the database
 * span of the query records it: a span never carries a query's values (a task's input, a step's
 * output).
 */
function recordFailure(span: Span, thrown: unknown): void {
  const error = reportedError(thrown);
  if (error instanceof Error) {
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    return;
  }
  // Not `String(error)`: it throws for some thrown values, and the span would reject with that.
  const text = describeThrown(error);
  span.recordException(text);
  span.setStatus({ code: SpanStatusCode.ERROR, message: text });
}

/** Options of {@link withContinuedSpan}. */
export interface ContinuedSpanOptions {
  /** Set at the start, so samplers see them. */
  attributes?: Attributes;
  /** Default `INTERNAL`. */
  kind?: SpanKind;
  /** E.g. to the RPC span of the request that asked for the work, which is in another trace. */
  links?: Link[];
}

/**
 * Runs `fn` inside a new span whose parent is the span a stored `traceparent` names (a task's,
 * say), whatever span happens to be active: how work done hours after `CreateTask` still lands in
 * the task's trace. Without a (valid) traceparent the span starts a trace of its own. Errors are
 * recorded and rethrown as in {@link withSpan}.
 */
export async function withContinuedSpan<T>(
  tracer: Tracer,
  traceparent: string | null | undefined,
  name: string,
  options: ContinuedSpanOptions,
  fn: (span: Span) => Promise<T> | T,
): Promise<T> {
  const parent = contextFromTraceparent(traceparent ?? '');
  return tracer.startActiveSpan(
    name,
    {
      ...(options.attributes ? { attributes: options.attributes } : {}),
      ...(options.kind === undefined ? {} : { kind: options.kind }),
      ...(options.links ? { links: options.links } : {}),
    },
    parent,
    async (span) => {
      try {
        return await fn(span);
      } catch (error) {
        recordFailure(span, error);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * The tracer named `name` of the running SDK (a no-op one before `startTracing`), for libraries
 * and service modules that are not handed a {@link Tracing}.
 */
export function tracerFor(name: string, version?: string): Tracer {
  return trace.getTracer(name, version);
}

/** The active span, if any: e.g. to add an event to the span of the unit of work in progress. */
export function activeSpan(): Span | undefined {
  return trace.getActiveSpan();
}

/**
 * The W3C `traceparent` of the active span (`00-<trace id>-<span id>-<flags>`), to store on a task
 * row or send along; `undefined` outside a span or when tracing is not started. Only the
 * `traceparent` is kept: Sluice puts nothing in `tracestate` or baggage.
 */
export function traceparentOfActiveSpan(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

/**
 * The W3C `traceparent` of `span` whether or not it is active: for work that opens several spans
 * at once (one per task of a batch) and stores each one's. `undefined` for a span that is not
 * recorded (tracing not started).
 */
export function traceparentOf(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  return carrier.traceparent;
}

/**
 * A context whose parent is the span a stored `traceparent` names, so spans started in it (e.g.
 * with `context.with(ctx, () => withSpan(...))`) continue that trace. A malformed traceparent
 * gives a context without a parent span, so the work starts a new trace rather than failing.
 *
 * @param base the context to add the parent to; default the root context, so whatever happens to
 *   be active does not leak into the continued trace.
 */
export function contextFromTraceparent(traceparent: string, base: Context = ROOT_CONTEXT): Context {
  return propagation.extract(base, { traceparent }, defaultTextMapGetter);
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The trace id inside a W3C `traceparent` (32 lower-case hex digits), what `GetTask` reports and
 * Jaeger searches by; `undefined` when the traceparent is malformed. Pure: needs no tracing SDK.
 */
export function traceIdOf(traceparent: string): string | undefined {
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, , rest] = match;
  // Version ff is forbidden; version 00 has exactly four fields (later versions may append more).
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === undefined || spanId === undefined) return undefined;
  return isValidTraceId(traceId) && isValidSpanId(spanId) ? traceId : undefined;
}

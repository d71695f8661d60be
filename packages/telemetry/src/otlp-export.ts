/**
 * Where a service's spans go, read from the standard OpenTelemetry environment variables, so an
 * operator points every Sluice service at Jaeger (or any OTLP collector) the same way they would
 * any other OpenTelemetry program — no Sluice-specific settings.
 *
 * {@link traceExportConfigFromEnv} reads the variables into a plain value (what the unit tests
 * check); {@link createSampler} and {@link createSpanProcessors} turn that value into SDK objects
 * for `startTracing`. The variables are read from an explicit environment, not from whatever the
 * SDK finds in `process.env`, so a test can configure one tracer without touching the process.
 *
 * Without an endpoint and without `OTEL_TRACES_EXPORTER`, nothing is exported (spans are still
 * created and propagated, so ids reach logs, messages and task rows).
 */
import { diag } from '@opentelemetry/api';
import { createRequire } from 'node:module';
import type * as OtlpGrpcExport from '@opentelemetry/exporter-trace-otlp-grpc';
import type * as OtlpProtoExport from '@opentelemetry/exporter-trace-otlp-proto';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { Sampler, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

/** An environment to read the `OTEL_*` variables from, e.g. `process.env`. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** The OTLP transports Sluice exports over (`OTEL_EXPORTER_OTLP_PROTOCOL`). */
export type OtlpProtocol = 'http/protobuf' | 'grpc';

/** One place finished spans go. */
export type TraceExporterConfig =
  | { readonly kind: 'console' }
  | {
      readonly kind: 'otlp';
      readonly protocol: OtlpProtocol;
      /** The full URL (`…/v1/traces`) for HTTP; the gRPC target (`http://host:4317`) for gRPC. */
      readonly url: string;
      /** From `OTEL_EXPORTER_OTLP_HEADERS` and `…_TRACES_HEADERS` (the latter wins). */
      readonly headers: Readonly<Record<string, string>>;
    };

/** The samplers of `OTEL_TRACES_SAMPLER` Sluice supports. */
export const SAMPLER_NAMES = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLER_NAMES)[number];

/** The tracing configuration of one process, as read from its environment. */
export interface TraceExportConfig {
  /** `OTEL_SDK_DISABLED=true`: no SDK at all; spans are no-ops and carry no ids. */
  readonly disabled: boolean;
  /**
   * `OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else the service's own
   * default.
   */
  readonly serviceName: string;
  /**
   * The resource attributes `OTEL_RESOURCE_ATTRIBUTES` sets (`service.namespace=sluice,…`), added
   * to the resource of every span; `service.name` is {@link TraceExportConfig.serviceName}.
   */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** Where spans go; empty: nowhere (the default without an endpoint). */
  readonly exporters: readonly TraceExporterConfig[];
  readonly sampler: SamplerName;
  /** `OTEL_TRACES_SAMPLER_ARG` for the ratio samplers, in [0, 1]; default 1. */
  readonly samplerRatio: number;
  /** How long the batch processor waits before sending what it has (`OTEL_BSP_SCHEDULE_DELAY`). */
  readonly scheduleDelayMs: number;
  /**
   * The most characters a span keeps of an attribute value, an event's (an exception's message and
   * stack) and its status message (`OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`, else
   * `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`); default {@link DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT}.
   */
  readonly attributeValueLengthLimit: number;
}

/**
 * Default `OTEL_BSP_SCHEDULE_DELAY`, in ms: shorter than the SDK's 5 s, so a task's spans show up in
 * Jaeger about when its events do; at Sluice's span rate a batch a second is cheap.
 */
export const DEFAULT_BSP_SCHEDULE_DELAY_MS = 1_000;

/**
 * Default attribute value length limit, in characters. The SDK's own default is no limit, and what
 * spans quote is often an error's message (a handler's, an HTTP error quoting a response body, a
 * failed query with its parameters): unbounded, one such error put megabytes into every exported
 * copy of its span, and into an export request a collector refuses whole (4 MiB is the usual
 * gRPC receive limit), with the spans batched beside it. A stack trace of Node's ten frames under
 * a step error's 2,000 characters fits.
 */
export const DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT = 4_096;

/** The OTLP endpoints the specification gives as defaults, per protocol. */
const DEFAULT_ENDPOINT: Record<OtlpProtocol, string> = {
  'http/protobuf': 'http://localhost:4318',
  grpc: 'http://localhost:4317',
};

/**
 * Reads the tracing configuration from `env`:
 *
 * - `OTEL_SDK_DISABLED=true` turns tracing off altogether.
 * - `OTEL_SERVICE_NAME` overrides `defaultServiceName` (as does a `service.name` in
 *   `OTEL_RESOURCE_ATTRIBUTES`, `key=value,…` with URL-encoded values, whose other attributes are
 *   added to the resource).
 * - `OTEL_TRACES_EXPORTER`: a comma-separated list of `otlp`, `console`, `none`. Unset, it is
 *   `otlp` when an endpoint variable is set and `none` otherwise.
 * - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (HTTP appends
 *   `/v1/traces`); `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`
 *   (`http/protobuf`, the default, or `grpc`); `OTEL_EXPORTER_OTLP_HEADERS` /
 *   `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (`key=value,…`, values URL-encoded).
 * - `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`; default `parentbased_always_on`.
 * - `OTEL_BSP_SCHEDULE_DELAY` in ms; default {@link DEFAULT_BSP_SCHEDULE_DELAY_MS}.
 * - `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` / `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` in characters;
 *   default {@link DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT}.
 *
 * An unknown value is reported through the OpenTelemetry diagnostic logger and replaced by the
 * default, as the SDKs do: a typo in a tracing variable must not stop a service.
 */
export function traceExportConfigFromEnv(
  env: Environment,
  defaultServiceName: string,
): TraceExportConfig {
  const sampler = samplerOf(env);
  const { 'service.name': namedInAttributes, ...resourceAttributes } = keyValuesOf(
    'OTEL_RESOURCE_ATTRIBUTES',
    text(env, 'OTEL_RESOURCE_ATTRIBUTES'),
  );
  return {
    disabled: text(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true',
    serviceName: text(env, 'OTEL_SERVICE_NAME') ?? namedInAttributes ?? defaultServiceName,
    resourceAttributes,
    exporters: exportersOf(env),
    sampler,
    samplerRatio: ratioOf(env, sampler),
    scheduleDelayMs: delayOf(env),
    attributeValueLengthLimit: lengthLimitOf(env),
  };
}

/** The sampler `config` names. */
export function createSampler(
  config: Pick<TraceExportConfig, 'sampler' | 'samplerRatio'>,
): Sampler {
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(config.samplerRatio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.samplerRatio) });
  }
}

/**
 * One processor per exporter of `config`: a `BatchSpanProcessor` around each OTLP exporter (so a
 * slow collector never holds up a request), a `SimpleSpanProcessor` around the console one (so
 * what is printed is printed at once).
 */
export function createSpanProcessors(
  config: Pick<TraceExportConfig, 'exporters' | 'scheduleDelayMs'>,
): SpanProcessor[] {
  return config.exporters.map((exporter) => {
    if (exporter.kind === 'console') return new SimpleSpanProcessor(new ConsoleSpanExporter());
    return new BatchSpanProcessor(otlpExporter(exporter), {
      scheduledDelayMillis: config.scheduleDelayMs,
    });
  });
}

/**
 * Loads the OTLP exporters only for a process that exports over OTLP: each brings its transport
 * (the gRPC one `@grpc/grpc-js`, both protobuf encoding), about 0.1–0.2 CPU-seconds at the start
 * of every service that exports nothing, the default. The packages are CommonJS, so a `require`
 * loads them synchronously, where tracing is started.
 */
const loadPackage = createRequire(import.meta.url);

function otlpExporter(exporter: Extract<TraceExporterConfig, { kind: 'otlp' }>): SpanExporter {
  if (exporter.protocol === 'grpc') {
    const { OTLPTraceExporter } = loadPackage(
      '@opentelemetry/exporter-trace-otlp-grpc',
    ) as typeof OtlpGrpcExport;
    // gRPC metadata (the headers) and TLS credentials are read by the exporter itself from the
    // same variables in `process.env`: building `Metadata` needs `@grpc/grpc-js`.
    return new OTLPTraceExporter({ url: exporter.url });
  }
  const { OTLPTraceExporter } = loadPackage(
    '@opentelemetry/exporter-trace-otlp-proto',
  ) as typeof OtlpProtoExport;
  return new OTLPTraceExporter({ url: exporter.url, headers: { ...exporter.headers } });
}

function text(env: Environment, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function exportersOf(env: Environment): TraceExporterConfig[] {
  const endpoint =
    text(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? text(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const listed = text(env, 'OTEL_TRACES_EXPORTER');
  const names = (listed ?? (endpoint === undefined ? 'none' : 'otlp'))
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (names.includes('none')) return [];
  const exporters: TraceExporterConfig[] = [];
  for (const name of new Set(names)) {
    if (name === 'console') exporters.push({ kind: 'console' });
    else if (name === 'otlp') exporters.push(otlpOf(env));
    else diag.warn(`OTEL_TRACES_EXPORTER: unsupported exporter "${name}" ignored`);
  }
  return exporters;
}

function otlpOf(env: Environment): TraceExporterConfig {
  const protocol = protocolOf(env);
  const tracesEndpoint = text(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const endpoint = text(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') ?? DEFAULT_ENDPOINT[protocol];
  const url =
    tracesEndpoint ??
    (protocol === 'grpc' ? endpoint : `${endpoint.replace(/\/+$/, '')}/v1/traces`);
  return {
    kind: 'otlp',
    protocol,
    url,
    headers: {
      ...keyValuesOf('OTEL_EXPORTER_OTLP_HEADERS', text(env, 'OTEL_EXPORTER_OTLP_HEADERS')),
      ...keyValuesOf(
        'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
        text(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
      ),
    },
  };
}

function protocolOf(env: Environment): OtlpProtocol {
  const name = 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  const value = text(env, name) ?? text(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (value === undefined || value === 'http/protobuf') return 'http/protobuf';
  if (value === 'grpc') return 'grpc';
  diag.warn(`OTEL_EXPORTER_OTLP_PROTOCOL: unsupported "${value}", using http/protobuf`);
  return 'http/protobuf';
}

/**
 * `key1=value1,key2=value2` (W3C baggage format, values URL-encoded), the form of the headers and
 * resource attributes variables; bad pairs are dropped.
 */
function keyValuesOf(variable: string, value: string | undefined): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const pair of value?.split(',') ?? []) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    const key = pair.slice(0, at).trim();
    try {
      pairs[decodeURIComponent(key)] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      diag.warn(`${variable}: malformed entry "${key}" ignored`);
    }
  }
  return pairs;
}

function samplerOf(env: Environment): SamplerName {
  const value = text(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase();
  if (value === undefined) return 'parentbased_always_on';
  if ((SAMPLER_NAMES as readonly string[]).includes(value)) return value as SamplerName;
  diag.warn(`OTEL_TRACES_SAMPLER: unsupported "${value}", using parentbased_always_on`);
  return 'parentbased_always_on';
}

function ratioOf(env: Environment, sampler: SamplerName): number {
  const value = text(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (value === undefined) return 1;
  const ratio = Number(value);
  if (Number.isFinite(ratio) && ratio >= 0 && ratio <= 1) return ratio;
  if (sampler.endsWith('traceidratio')) {
    diag.warn(`OTEL_TRACES_SAMPLER_ARG: "${value}" is not a ratio in [0, 1], using 1`);
  }
  return 1;
}

function delayOf(env: Environment): number {
  const value = text(env, 'OTEL_BSP_SCHEDULE_DELAY');
  if (value === undefined) return DEFAULT_BSP_SCHEDULE_DELAY_MS;
  const delay = Number(value);
  if (Number.isInteger(delay) && delay >= 0) return delay;
  diag.warn(`OTEL_BSP_SCHEDULE_DELAY: "${value}" is not a number of ms, using the default`);
  return DEFAULT_BSP_SCHEDULE_DELAY_MS;
}

function lengthLimitOf(env: Environment): number {
  for (const name of [
    'OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT',
    'OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT',
  ]) {
    const value = text(env, name);
    if (value === undefined) continue;
    const limit = Number(value);
    if (Number.isInteger(limit) && limit >= 0) return limit;
    diag.warn(`${name}: "${value}" is not a number of characters, using the default`);
    return DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT;
  }
  return DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT;
}

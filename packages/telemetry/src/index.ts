/**
 * `@sluice/telemetry`: logs, traces and metrics, named in one place.
 *
 * Libraries use only `withSpan`, the `ATTR_*` names and the trace-context helpers (all on
 * `@opentelemetry/api`); a service's `main.ts` starts the SDK and the metrics endpoint.
 *
 * @example
 * ```ts
 * import {
 *   ATTR_TASK_ID, createLogger, createMetrics, startMetricsServer, startTracing, withSpan,
 * } from '@sluice/telemetry';
 *
 * const log = createLogger({ service: 'scheduler', level: 'info' });
 * const tracing = startTracing({ serviceName: 'scheduler' });
 * const metrics = createMetrics();
 * const server = await startMetricsServer({ port: 9464, registry: metrics.registry });
 *
 * const tracer = tracing.tracer('@sluice/scheduler');
 * await withSpan(tracer, 'scheduler.dispatch', { [ATTR_TASK_ID]: taskId }, async () => {
 *   metrics.stepsDispatched.inc({ resource: 'llm', priority: 'P1' });
 *   log.info({ task_id: taskId }, 'step dispatched'); // carries trace_id and span_id
 * });
 *
 * await server.stop();
 * await tracing.shutdown();
 * ```
 *
 * @packageDocumentation
 */
export {
  ATTR_CREATE_GROUP_SIZE,
  ATTR_PRIORITY,
  ATTR_RESOURCE,
  ATTR_RETRY_NEXT_ATTEMPT_AT,
  ATTR_STEP,
  ATTR_STEP_ATTEMPT,
  ATTR_TASK_EVENT,
  ATTR_TASK_ID,
  ATTR_TASK_STATUS_FROM,
  ATTR_TASK_STATUS_TO,
  ATTR_TASK_TYPE,
  ATTR_TENANT,
  EVENT_STEP_RETRY_SCHEDULED,
  EVENT_TASK_TRANSITION,
} from './attributes.js';
export {
  ATTR_ERROR_TYPE,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
  ATTR_RPC_GRPC_STATUS_CODE,
  ATTR_RPC_METHOD,
  ATTR_RPC_SERVICE,
  ATTR_RPC_SYSTEM,
} from './conventions.js';
export { DEFAULT_LOG_LEVEL, LOG_LEVELS, createLogger, isLogLevel, scrubSecrets } from './logger.js';
export { REDACTED, SECRET_KEYS, SECRET_QUERY_PARAMS, redactSecrets } from './redaction.js';
export type { LogLevel, Logger, LoggerOptions } from './logger.js';
export {
  APPROVAL_WAIT_BUCKETS_SECONDS,
  GRPC_DURATION_BUCKETS_SECONDS,
  METRIC_DEFINITIONS,
  RUN_TIME_BUCKETS_SECONDS,
  WAIT_TIME_BUCKETS_SECONDS,
  createMetrics,
} from './metrics.js';
export type { MetricDefinition, MetricKey, MetricLabels, Metrics } from './metrics.js';
export { DEFAULT_METRICS_HOST, startMetricsServer } from './metrics-server.js';
export type { MetricsServer, MetricsServerOptions } from './metrics-server.js';
export {
  DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT,
  DEFAULT_BSP_SCHEDULE_DELAY_MS,
  SAMPLER_NAMES,
  createSampler,
  createSpanProcessors,
  traceExportConfigFromEnv,
} from './otlp-export.js';
export type {
  Environment,
  OtlpProtocol,
  SamplerName,
  TraceExportConfig,
  TraceExporterConfig,
} from './otlp-export.js';
export { SpanKind } from '@opentelemetry/api';
export type { Attributes, Link, Span, Tracer } from '@opentelemetry/api';
export {
  activeSpan,
  contextFromTraceparent,
  startTracing,
  traceIdOf,
  traceparentOf,
  traceparentOfActiveSpan,
  tracerFor,
  withContinuedSpan,
  withSpan,
} from './tracing.js';
export type { ContinuedSpanOptions, Tracing, TracingOptions } from './tracing.js';

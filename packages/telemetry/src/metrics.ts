/**
 * The metric catalogue of Sluice: every metric's name, help text, labels and buckets in one place,
 * and {@link createMetrics}, which instantiates them on a fresh registry.
 *
 * Naming follows Prometheus: a `sluice_` prefix, the base unit as a suffix (`_seconds`), `_total`
 * on counters. Labels are bounded sets only (priority, resource, task type, outcome, error class,
 * gRPC method and code): task ids and tenant ids NEVER become labels, since each distinct value is
 * a new time series kept forever. They belong on spans and log lines instead.
 *
 * Label values: `priority` is `P0`…`P3`, `resource` a resource name (`llm`, `tool:http`), `type` a
 * task type name, `code` a gRPC status name (`OK`, `NOT_FOUND`), `decision` how an approval wait
 * ended (`approved`, `rejected`, `timed_out`, `cancelled`).
 *
 * Each metric is recorded once per event, by the one process that sees it happen: task creation
 * and gRPC calls by the gateway; dispatches, retries, dead letters by the scheduler; busy slots by
 * each executor; signals, levels and breakers by the governor. The task lifecycle metrics (wait,
 * run and approval-wait times, cancellations) are derived by the scheduler's event relay from the
 * `task_events` rows it publishes, since a transition can be applied by any service (a cancel ends
 * in the gateway or the scheduler, a start in an executor) while every one of them is relayed once.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PROM_CLIENT_SAMPLE_MS, replaceEventLoopLagGauges } from './event-loop-lag.js';

/**
 * Bounds of the queue-wait histogram, in seconds: from a task admitted at once on an idle system
 * to one held back for an hour behind higher priorities.
 */
export const WAIT_TIME_BUCKETS_SECONDS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
] as const;

/** Bounds of the run-time histogram, in seconds: agent tasks run from a second to hours. */
export const RUN_TIME_BUCKETS_SECONDS = [
  0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400,
] as const;

/** Bounds of the approval-wait histogram, in seconds: a human answers in a minute or a day. */
export const APPROVAL_WAIT_BUCKETS_SECONDS = [
  1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400,
] as const;

/** Bounds of the gRPC latency histogram, in seconds: unary calls, a millisecond to a few seconds. */
export const GRPC_DURATION_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
] as const;

/**
 * The catalogue. Each entry's `name` is what Prometheus scrapes; the key is the property of
 * {@link Metrics} that records it.
 */
export const METRIC_DEFINITIONS = {
  queueDepth: {
    name: 'sluice_queue_depth_by_priority',
    help: 'Ready steps waiting to be admitted, by priority and resource.',
    labelNames: ['priority', 'resource'],
  },
  taskWaitTime: {
    name: 'sluice_task_wait_time_seconds',
    help: 'Time from a task being created (or retried by a person) to the first step of that attempt starting, in seconds.',
    labelNames: ['priority', 'type'],
    buckets: WAIT_TIME_BUCKETS_SECONDS,
  },
  taskRunTime: {
    name: 'sluice_task_run_time_seconds',
    help: 'Time from the first step of a task attempt starting to the task reaching a final state, in seconds.',
    labelNames: ['priority', 'type'],
    buckets: RUN_TIME_BUCKETS_SECONDS,
  },
  retryCount: {
    name: 'sluice_retry_count_total',
    help: 'Step attempts scheduled for retry, by the class of the error that caused them.',
    labelNames: ['error_class'],
  },
  deadLetterCount: {
    name: 'sluice_dead_letter_count_total',
    help: 'Tasks moved to the dead letter state, by reason.',
    labelNames: ['reason'],
  },
  cancellations: {
    name: 'sluice_cancellations_total',
    help: 'Tasks that became cancelled (cancel, a running task stopping after a cancel, reject, approval timeout). The cancellation rate is this over sluice_tasks_created_total.',
    labelNames: [],
  },
  approvalWaitTime: {
    name: 'sluice_approval_wait_time_seconds',
    help: 'Time a task waited for a human approval until it was decided, in seconds, by decision (approved, rejected, timed_out, cancelled).',
    labelNames: ['decision'],
    buckets: APPROVAL_WAIT_BUCKETS_SECONDS,
  },
  workerUtilization: {
    name: 'sluice_worker_utilization',
    help: 'Busy slots over all slots of the executors of a resource, from 0 to 1.',
    labelNames: ['resource'],
  },
  backpressureTriggerCount: {
    name: 'sluice_backpressure_trigger_count_total',
    help: 'Governor ticks that decided to throttle, degrade, hold or reject, by decision and the signal that caused it.',
    labelNames: ['decision', 'cause'],
  },
  governorSignal: {
    name: 'sluice_governor_signal',
    help: 'The latest reading of each governor signal, by signal and scope (a resource, a priority, all).',
    labelNames: ['signal', 'scope'],
  },
  governorLevel: {
    name: 'sluice_governor_level',
    help: "The governor's overall pressure level: 0 normal, 1 throttle, 2 degrade, 3 hold, 4 reject.",
    labelNames: [],
  },
  breakerState: {
    name: 'sluice_breaker_state',
    help: 'Circuit breaker state by resource: 0 closed, 1 half-open, 2 open.',
    labelNames: ['resource'],
  },
  breakerTransitions: {
    name: 'sluice_breaker_transitions_total',
    help: 'Circuit breaker state changes, by resource and the states left and entered.',
    labelNames: ['resource', 'from', 'to'],
  },
  resourceLimit: {
    name: 'sluice_resource_limit',
    help: 'The in-flight limit the governor sets for a resource (adaptive LLM limit, override, half-open probes).',
    labelNames: ['resource'],
  },
  admissionRejections: {
    name: 'sluice_admission_rejections_total',
    help: 'CreateTask calls answered RESOURCE_EXHAUSTED because the governor rejects their priority.',
    labelNames: ['priority'],
  },
  urgentGuardCap: {
    name: 'sluice_urgent_guard_cap',
    help: 'P1–P3 steps a resource may have in flight while its P0 steps wait longer than the target (the urgent-wait guard); absent when not capped.',
    labelNames: ['resource'],
  },
  admissionHeld: {
    name: 'sluice_admission_held_total',
    help: 'Claims made while the governor held or throttled priorities, by priority and how (held, throttled).',
    labelNames: ['priority', 'how'],
  },
  grpcRequests: {
    name: 'sluice_grpc_requests_total',
    help: 'gRPC calls answered, by method and status code.',
    labelNames: ['method', 'code'],
  },
  grpcRequestDuration: {
    name: 'sluice_grpc_request_duration_seconds',
    help: 'Time to answer a unary gRPC call, in seconds (streams are not observed).',
    labelNames: ['method'],
    buckets: GRPC_DURATION_BUCKETS_SECONDS,
  },
  stepsDispatched: {
    name: 'sluice_steps_dispatched_total',
    help: 'Steps claimed from the ready queue and published to executors.',
    labelNames: ['resource', 'priority'],
  },
  stepsFinished: {
    name: 'sluice_steps_finished_total',
    help: 'Step attempts whose outcome was recorded, by resource and outcome.',
    labelNames: ['resource', 'outcome'],
  },
  tasksCreated: {
    name: 'sluice_tasks_created_total',
    help: 'Tasks created (idempotent repeats excluded), by priority.',
    labelNames: ['priority'],
  },
  eventsRelayed: {
    name: 'sluice_events_relayed_total',
    help: 'Task events published from Postgres to NATS by the event relay.',
    labelNames: [],
  },
  retryBudgetExhausted: {
    name: 'sluice_retry_budget_exhausted_total',
    help: 'Retries pushed later than their backoff because the resource had used its retry budget.',
    labelNames: ['resource'],
  },
  retentionDeleted: {
    name: 'sluice_retention_deleted_rows_total',
    help: 'Rows deleted by retention, by table (tasks, task_steps, task_events, task_timers, dead_letters, idempotency_tombstones).',
    labelNames: ['table'],
  },
} as const satisfies Record<string, MetricDefinition>;

/** The shape of one catalogue entry. */
export interface MetricDefinition {
  /** The Prometheus name, `sluice_…`, ending in its unit and `_total` for counters. */
  readonly name: string;
  /** One sentence for `# HELP`. */
  readonly help: string;
  /** The label names; bounded value sets only. */
  readonly labelNames: readonly string[];
  /** Upper bounds of a histogram's buckets, ascending. */
  readonly buckets?: readonly number[];
}

/** The key of a catalogue entry, e.g. `queueDepth`. */
export type MetricKey = keyof typeof METRIC_DEFINITIONS;

/** The label names of a catalogue entry, as a union. */
export type MetricLabels<K extends MetricKey> =
  (typeof METRIC_DEFINITIONS)[K]['labelNames'][number];

/** The metric objects of one service, each registered on {@link Metrics.registry}. */
export interface Metrics {
  /** The registry to serve on `/metrics`: the catalogue plus the default process metrics. */
  readonly registry: Registry;
  readonly queueDepth: Gauge<MetricLabels<'queueDepth'>>;
  readonly taskWaitTime: Histogram<MetricLabels<'taskWaitTime'>>;
  readonly taskRunTime: Histogram<MetricLabels<'taskRunTime'>>;
  readonly retryCount: Counter<MetricLabels<'retryCount'>>;
  readonly deadLetterCount: Counter<MetricLabels<'deadLetterCount'>>;
  readonly cancellations: Counter<MetricLabels<'cancellations'>>;
  readonly approvalWaitTime: Histogram<MetricLabels<'approvalWaitTime'>>;
  readonly workerUtilization: Gauge<MetricLabels<'workerUtilization'>>;
  readonly backpressureTriggerCount: Counter<MetricLabels<'backpressureTriggerCount'>>;
  readonly grpcRequests: Counter<MetricLabels<'grpcRequests'>>;
  readonly grpcRequestDuration: Histogram<MetricLabels<'grpcRequestDuration'>>;
  readonly stepsDispatched: Counter<MetricLabels<'stepsDispatched'>>;
  readonly stepsFinished: Counter<MetricLabels<'stepsFinished'>>;
  readonly tasksCreated: Counter<MetricLabels<'tasksCreated'>>;
  readonly eventsRelayed: Counter<MetricLabels<'eventsRelayed'>>;
  readonly retryBudgetExhausted: Counter<MetricLabels<'retryBudgetExhausted'>>;
  readonly retentionDeleted: Counter<MetricLabels<'retentionDeleted'>>;
  readonly governorSignal: Gauge<MetricLabels<'governorSignal'>>;
  readonly governorLevel: Gauge<MetricLabels<'governorLevel'>>;
  readonly breakerState: Gauge<MetricLabels<'breakerState'>>;
  readonly breakerTransitions: Counter<MetricLabels<'breakerTransitions'>>;
  readonly resourceLimit: Gauge<MetricLabels<'resourceLimit'>>;
  readonly admissionRejections: Counter<MetricLabels<'admissionRejections'>>;
  readonly urgentGuardCap: Gauge<MetricLabels<'urgentGuardCap'>>;
  readonly admissionHeld: Counter<MetricLabels<'admissionHeld'>>;
}

/**
 * Creates every metric of the catalogue on a new registry, with Node's default process metrics
 * (`process_cpu_seconds_total`, `nodejs_eventloop_lag_seconds`, …) beside them; the event loop's
 * lag gauges sampled ten times a second, not a hundred (event-loop-lag.ts).
 *
 * A registry per call rather than prom-client's global one: tests run several services in one
 * process, and each must count only its own work. Every service creates the whole catalogue and
 * records what concerns it; a metric it never touches is simply not reported.
 */
export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({
    register: registry,
    eventLoopMonitoringPrecision: PROM_CLIENT_SAMPLE_MS,
  });
  replaceEventLoopLagGauges(registry);
  const d = METRIC_DEFINITIONS;
  return {
    registry,
    queueDepth: gauge(registry, d.queueDepth),
    taskWaitTime: histogram(registry, d.taskWaitTime),
    taskRunTime: histogram(registry, d.taskRunTime),
    retryCount: counter(registry, d.retryCount),
    deadLetterCount: counter(registry, d.deadLetterCount),
    cancellations: counter(registry, d.cancellations),
    approvalWaitTime: histogram(registry, d.approvalWaitTime),
    workerUtilization: gauge(registry, d.workerUtilization),
    backpressureTriggerCount: counter(registry, d.backpressureTriggerCount),
    grpcRequests: counter(registry, d.grpcRequests),
    grpcRequestDuration: histogram(registry, d.grpcRequestDuration),
    stepsDispatched: counter(registry, d.stepsDispatched),
    stepsFinished: counter(registry, d.stepsFinished),
    tasksCreated: counter(registry, d.tasksCreated),
    eventsRelayed: counter(registry, d.eventsRelayed),
    retryBudgetExhausted: counter(registry, d.retryBudgetExhausted),
    retentionDeleted: counter(registry, d.retentionDeleted),
    governorSignal: gauge(registry, d.governorSignal),
    governorLevel: gauge(registry, d.governorLevel),
    breakerState: gauge(registry, d.breakerState),
    breakerTransitions: counter(registry, d.breakerTransitions),
    resourceLimit: gauge(registry, d.resourceLimit),
    admissionRejections: counter(registry, d.admissionRejections),
    urgentGuardCap: gauge(registry, d.urgentGuardCap),
    admissionHeld: counter(registry, d.admissionHeld),
  };
}

interface Definition<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
}

function counter<L extends string>(registry: Registry, def: Definition<L>): Counter<L> {
  return new Counter({ ...base(def), registers: [registry] });
}

function gauge<L extends string>(registry: Registry, def: Definition<L>): Gauge<L> {
  return new Gauge({ ...base(def), registers: [registry] });
}

function histogram<L extends string>(
  registry: Registry,
  def: Definition<L> & { readonly buckets: readonly number[] },
): Histogram<L> {
  return new Histogram({ ...base(def), buckets: [...def.buckets], registers: [registry] });
}

function base<L extends string>(def: Definition<L>) {
  return { name: def.name, help: def.help, labelNames: def.labelNames };
}

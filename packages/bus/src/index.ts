/**
 * `@sluice/bus` — everything Sluice does with NATS: the catalogue of names, stream and consumer
 * specs, idempotent topology, the message codec, trace headers, durable publishing and the leader
 * lease. Stays within nats-server 2.9 (see NATS-NOTES.md).
 *
 * @example
 * ```ts
 * import { jetstream, jetstreamManager } from '@nats-io/jetstream';
 * import * as bus from '@sluice/bus';
 *
 * const catalog = bus.createBusCatalog('sluice');
 * const nc = await bus.connectNats({ url: 'nats://127.0.0.1:4222', name: 'scheduler' });
 * const jsm = await jetstreamManager(nc);
 * await bus.ensureTopology(jsm, catalog);
 * await bus.ensureStepConsumers(jsm, catalog, 'llm');
 *
 * // Dispatch step 1 of a task (ids only; the input stays in Postgres).
 * const message = bus.encodeMessage({
 *   type: 'step.dispatch', task_id: taskId, step_seq: 1, dispatch: 1,
 *   tenant_id: 'acme', priority: 0, resource: 'llm',
 * });
 * const subject = catalog.subjects.step('llm', 0);
 * const { seq } = await bus.publishDurable(jetstream(nc), subject, message, {
 *   msgID: bus.dispatchMsgId(taskId, 1, 1),
 *   headers: bus.injectTraceContext(),
 * });
 *
 * // Lead the event relay while holding a lease.
 * const { leases } = await bus.openKvBuckets(nc, catalog, { leaseTtlMs: 10_000 });
 * const lease = bus.createLease({
 *   kv: leases, key: 'relay', holderId: `relay-${process.pid}-${randomUUID()}`, ttlMs: 10_000,
 *   onAcquired: (token) => relay.start(token),
 *   onLost: () => relay.stop(),
 * });
 * await lease.start();
 * // … on SIGTERM:
 * await lease.stop();
 * await bus.closeNats(nc);
 * ```
 */
export { createBusCatalog, DEFAULT_PREFIX, WAKE_TARGETS, taskIdTokenProblem } from './catalog.js';
export type { BusCatalog, WakeTarget } from './catalog.js';

export {
  stepsStreamSpec,
  eventsStreamSpec,
  advisoriesStreamSpec,
  streamSpecs,
  stepConsumerSpec,
  deadLetterConsumerSpec,
  DEFAULT_PULL_EXPIRES_MS,
  DEFAULT_REPLICAS,
  DEFAULT_STEPS_MAX_MSGS,
  DEFAULT_STEPS_MAX_BYTES,
  DEFAULT_MAX_MSG_SIZE,
  DEFAULT_STEPS_DUPLICATE_WINDOW_MS,
  DEFAULT_EVENTS_MAX_AGE_MS,
  DEFAULT_EVENTS_MAX_BYTES,
  DEFAULT_EVENTS_DUPLICATE_WINDOW_MS,
  DEFAULT_ADVISORIES_MAX_AGE_MS,
  DEFAULT_ADVISORIES_MAX_BYTES,
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_MAX_DELIVER,
  DEFAULT_MAX_ACK_PENDING,
  DEFAULT_MAX_WAITING,
} from './specs.js';
export type {
  StreamSpec,
  ConsumerSpec,
  StreamOptions,
  StepConsumerOptions,
  DeadLetterConsumerOptions,
} from './specs.js';

export {
  ensureTopology,
  ensureStepConsumers,
  ensureDeadLetterConsumer,
  ensureStream,
  ensureConsumer,
  openKvBuckets,
  configMatches,
} from './topology.js';
export type {
  EnsureAction,
  TopologyOptions,
  TopologyReport,
  KvBucketOptions,
  KvBuckets,
} from './topology.js';

export { createTopologyRepair, isMissingTopologyError } from './topology-repair.js';
export { isMissingGovernorBucket, openGovernorBucket } from './governor-bucket.js';
export { readStreamMessage } from './stream-message.js';
export type { GovernorBucketReader } from './governor-bucket.js';
export {
  ADMISSION_LEVELS,
  AdmissionLevel,
  DECISIONS_KEY,
  decidedAdmission,
  decodeDecision,
  encodeDecision,
  MAX_DECISION_BYTES,
  NO_SIGNALS_REASON,
  NOTHING_DECIDED,
  normalDecision,
  parseDecision,
  sameDecision,
} from './governor-decision.js';
export type {
  BreakerView,
  DecidedAdmission,
  GovernorDecision,
  SignalReading,
} from './governor-decision.js';
export {
  DEFAULT_DECISION_STALE_MS,
  listsPriority,
  startDecisionView,
  UNGOVERNED,
} from './decision-view.js';
export type { DecisionView, DecisionViewOptions } from './decision-view.js';
export {
  decodeExecutorReport,
  encodeExecutorReport,
  MAX_REPORT_BYTES,
  parseExecutorReport,
} from './executor-report.js';
export type { ExecutorReport, LlmGateReport } from './executor-report.js';
export {
  GUARD_CAPS_FRESH_MS,
  MAX_GUARD_CAPS_BYTES,
  decodeGuardCaps,
  encodeGuardCaps,
  startGuardCapsView,
} from './guard-caps.js';
export type { GuardCapsNotice, GuardCapsView, GuardCapsViewOptions } from './guard-caps.js';
export type { TopologyRepair, TopologyRepairOptions } from './topology-repair.js';

export {
  connectNats,
  closeNats,
  serverProblem,
  MIN_SERVER_VERSION,
  DEFAULT_CLOSE_TIMEOUT_MS,
} from './connect.js';
export type { ConnectNatsOptions } from './connect.js';

export {
  BusMessageType,
  BusMessageError,
  isBusMessageError,
  encodeMessage,
  decodeMessage,
  decodeMessageOf,
  dispatchMsgId,
  eventMsgId,
  MAX_MESSAGE_BYTES,
} from './messages.js';
export type {
  BusMessage,
  BusMessageOf,
  StepDispatch,
  StepResult,
  Wake,
  CancelRequest,
  TaskEventNotice,
} from './messages.js';

export { wakeDispatcherForEach, type WakeStep } from './ready-step-wake.js';

export { decodeStepAdvisory } from './advisories.js';
export type { StepAdvisory, StepAdvisoryKind } from './advisories.js';

export { injectTraceContext, extractTraceContext } from './trace-headers.js';

export {
  publishDurable,
  BusPublishError,
  DEFAULT_PUBLISH_TIMEOUT_MS,
  DEFAULT_PUBLISH_ATTEMPTS,
  DEFAULT_PUBLISH_BACKOFF_MS,
} from './publish.js';
export type { PublishDurableOptions, PublishDurableResult } from './publish.js';

export { fetchEach, nextOrNull, isHeartbeatsMissed } from './fetch.js';
export type { PullOptions } from './fetch.js';

export { createLease } from './lease.js';
export type { Lease, LeaseOptions, LeaseLostReason } from './lease.js';

export { publishClaimedSteps, ATTR_DISPATCH, ATTR_STREAM_SEQUENCE } from './dispatch-publish.js';
export type {
  DispatchPublishDeps,
  PublishedStep,
  StepToPublish,
  UnpublishedStep,
} from './dispatch-publish.js';

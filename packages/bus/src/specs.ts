/**
 * Stream and consumer configurations as data: pure functions of the catalog and options, so the
 * limits of the whole deployment can be read (and tested) in one place and `topology.ts` only has
 * to make the server match them.
 *
 * Everything here stays within nats-server 2.9: one filter subject per consumer, no per-message TTL,
 * no metadata, no compression (see NATS-NOTES.md §1).
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  ReplayPolicy,
  RetentionPolicy,
  StorageType,
} from '@nats-io/jetstream';
import type { ConsumerConfig, StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { SluiceError } from '@sluice/core';
import type { Priority } from '@sluice/core';
import type { BusCatalog } from './catalog.js';

/** A stream configuration with the fields Sluice sets; `name` is always present. */
export type StreamSpec = Partial<StreamConfig> & Pick<StreamConfig, 'name' | 'subjects'>;

/** A durable consumer configuration with the fields Sluice sets. */
export type ConsumerSpec = Partial<ConsumerConfig> &
  Pick<ConsumerConfig, 'ack_policy' | 'deliver_policy'> & { durable_name: string };

const SECOND_MS = 1_000;
const MINUTE_MS = 60 * SECOND_MS;
const DAY_MS = 24 * 60 * MINUTE_MS;
const MIB = 1024 * 1024;

/** Replicas of every stream and bucket: 1 on a single server; 3 on a cluster. */
export const DEFAULT_REPLICAS = 1;
/**
 * Dispatches waiting in the steps stream at most. The scheduler admits only what fits the resource
 * limits, so this is a safety bound; a full stream rejects publishes (`discard: new`).
 */
export const DEFAULT_STEPS_MAX_MSGS = 1_000_000;
/** Bytes of waiting dispatches at most (a dispatch is a few hundred bytes). */
export const DEFAULT_STEPS_MAX_BYTES = 1024 * MIB;
/**
 * Largest message accepted by the steps and events streams. Messages carry ids, never payloads, so
 * anything bigger is a bug to surface at the publisher, not a 1 MiB blob to deliver.
 */
export const DEFAULT_MAX_MSG_SIZE = 64 * 1024;
/** How long a dispatch's message id is remembered; must cover a publisher's retries (2 min). */
export const DEFAULT_STEPS_DUPLICATE_WINDOW_MS = 2 * MINUTE_MS;
/** How long task event notices stay replayable from the events stream (Postgres keeps them all). */
export const DEFAULT_EVENTS_MAX_AGE_MS = 7 * DAY_MS;
/** Bytes of event notices kept at most; the oldest go first. */
export const DEFAULT_EVENTS_MAX_BYTES = 1024 * MIB;
/** How long an event notice's id is remembered, capped by the events' max age (a server rule). */
export const DEFAULT_EVENTS_DUPLICATE_WINDOW_MS = 2 * MINUTE_MS;
/** How long a dead-letter advisory waits for the dead-letter worker before it ages out. */
export const DEFAULT_ADVISORIES_MAX_AGE_MS = 7 * DAY_MS;
/** Bytes of advisories kept at most. */
export const DEFAULT_ADVISORIES_MAX_BYTES = 256 * MIB;
/** A step message not acknowledged within this is redelivered (an executor died). */
export const DEFAULT_ACK_WAIT_MS = 30 * SECOND_MS;
/** Deliveries of one step message before JetStream gives up and emits MAX_DELIVERIES. */
export const DEFAULT_MAX_DELIVER = 5;
/**
 * Unacknowledged messages per consumer across all executors (the 2.9 server default, made
 * explicit). The scheduler's resource limits are the real bound; this is a safety net.
 */
export const DEFAULT_MAX_ACK_PENDING = 1_000;
/** Concurrent pull requests per consumer (the 2.9 server default, made explicit). */
export const DEFAULT_MAX_WAITING = 512;
/**
 * Expiry of each pull request for `consume()`/`fetch()`. Short, because after a consumer-leader
 * failover v3's `consume()` only recovers when a pull expires (NATS-NOTES.md §10, item 1); the
 * server's minimum is 1 s.
 */
export const DEFAULT_PULL_EXPIRES_MS = 5_000;
/** The server refuses a duplicate window under 100 ms. */
const MIN_DUPLICATE_WINDOW_MS = 100;

/** Limits of the three streams. Durations in milliseconds. Every field is optional. */
export interface StreamOptions {
  /** Replicas of every stream (default {@link DEFAULT_REPLICAS}; 3 on a cluster). */
  readonly replicas?: number;
  readonly steps?: {
    readonly maxMsgs?: number;
    readonly maxBytes?: number;
    readonly maxMsgSize?: number;
    readonly duplicateWindowMs?: number;
  };
  readonly events?: {
    readonly maxAgeMs?: number;
    readonly maxBytes?: number;
    readonly maxMsgSize?: number;
    /** Capped at `maxAgeMs` when larger (the server refuses a window beyond the max age). */
    readonly duplicateWindowMs?: number;
  };
  readonly advisories?: {
    readonly maxAgeMs?: number;
    readonly maxBytes?: number;
  };
}

/** Settings of the dead-letter worker's consumer. Durations in milliseconds. */
export interface DeadLetterConsumerOptions {
  /** Redelivery timeout of an advisory being processed (default {@link DEFAULT_ACK_WAIT_MS}). */
  readonly ackWaitMs?: number;
}

/** Settings of the step consumers. Durations in milliseconds. Every field is optional. */
export interface StepConsumerOptions {
  /** Redelivery timeout of an unacknowledged dispatch (default {@link DEFAULT_ACK_WAIT_MS}). */
  readonly ackWaitMs?: number;
  /** Deliveries before the MAX_DELIVERIES advisory (default {@link DEFAULT_MAX_DELIVER}). */
  readonly maxDeliver?: number;
  /** In-flight cap across all executors (default {@link DEFAULT_MAX_ACK_PENDING}). */
  readonly maxAckPending?: number;
  /** Concurrent pull requests (default {@link DEFAULT_MAX_WAITING}). */
  readonly maxWaiting?: number;
}

function positiveInt(value: number | undefined, fallback: number, field: string): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new SluiceError('invalid_argument', `${field} must be a positive integer, got ${v}`, {
      field,
    });
  }
  return v;
}

function duplicateWindow(ms: number, field: string): number {
  if (ms < MIN_DUPLICATE_WINDOW_MS) {
    throw new SluiceError(
      'invalid_argument',
      `${field} must be at least ${MIN_DUPLICATE_WINDOW_MS} ms, got ${ms}`,
      { field },
    );
  }
  return ms;
}

/**
 * The steps stream: a file-backed work queue of admitted dispatches. `discard: new` with explicit
 * limits, so a full queue rejects publishes instead of silently dropping admitted work.
 */
export function stepsStreamSpec(catalog: BusCatalog, options: StreamOptions = {}): StreamSpec {
  const o = options.steps ?? {};
  const windowMs = positiveInt(
    o.duplicateWindowMs,
    DEFAULT_STEPS_DUPLICATE_WINDOW_MS,
    'steps.duplicateWindowMs',
  );
  return {
    name: catalog.streams.steps,
    subjects: [catalog.subjects.stepsAll],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_msgs: positiveInt(o.maxMsgs, DEFAULT_STEPS_MAX_MSGS, 'steps.maxMsgs'),
    max_bytes: positiveInt(o.maxBytes, DEFAULT_STEPS_MAX_BYTES, 'steps.maxBytes'),
    max_msg_size: positiveInt(o.maxMsgSize, DEFAULT_MAX_MSG_SIZE, 'steps.maxMsgSize'),
    duplicate_window: nanos(duplicateWindow(windowMs, 'steps.duplicateWindowMs')),
    num_replicas: positiveInt(options.replicas, DEFAULT_REPLICAS, 'replicas'),
    // The scheduler reads single messages by direct get, which a stream being created (after a
    // lost store) cannot crash 2.9.10 with, where a message get can (stream-message.ts).
    allow_direct: true,
  };
}

/**
 * The events stream: limits retention by age, so a late subscriber can replay recent event notices.
 * Postgres keeps every event; this stream may drop the oldest (`discard: old`).
 */
export function eventsStreamSpec(catalog: BusCatalog, options: StreamOptions = {}): StreamSpec {
  const o = options.events ?? {};
  const maxAgeMs = positiveInt(o.maxAgeMs, DEFAULT_EVENTS_MAX_AGE_MS, 'events.maxAgeMs');
  const windowMs = Math.min(
    positiveInt(
      o.duplicateWindowMs,
      DEFAULT_EVENTS_DUPLICATE_WINDOW_MS,
      'events.duplicateWindowMs',
    ),
    maxAgeMs,
  );
  return {
    name: catalog.streams.events,
    subjects: [catalog.subjects.eventsAll],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: nanos(maxAgeMs),
    max_bytes: positiveInt(o.maxBytes, DEFAULT_EVENTS_MAX_BYTES, 'events.maxBytes'),
    max_msg_size: positiveInt(o.maxMsgSize, DEFAULT_MAX_MSG_SIZE, 'events.maxMsgSize'),
    duplicate_window: nanos(duplicateWindow(windowMs, 'events.duplicateWindowMs')),
    num_replicas: positiveInt(options.replicas, DEFAULT_REPLICAS, 'replicas'),
  };
}

/**
 * The advisories stream: persists the steps stream's MAX_DELIVERIES and MSG_TERMINATED advisories so
 * that the dead-letter worker sees them even if it was down when they fired (a core subscription
 * would miss them). The advisory payload carries the step message's stream sequence only.
 */
export function advisoriesStreamSpec(catalog: BusCatalog, options: StreamOptions = {}): StreamSpec {
  const o = options.advisories ?? {};
  return {
    name: catalog.streams.advisories,
    subjects: [catalog.subjects.stepMaxDeliveriesAdvisory, catalog.subjects.stepTerminatedAdvisory],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_age: nanos(positiveInt(o.maxAgeMs, DEFAULT_ADVISORIES_MAX_AGE_MS, 'advisories.maxAgeMs')),
    max_bytes: positiveInt(o.maxBytes, DEFAULT_ADVISORIES_MAX_BYTES, 'advisories.maxBytes'),
    num_replicas: positiveInt(options.replicas, DEFAULT_REPLICAS, 'replicas'),
  };
}

/** The three stream specs, in the order they are created. */
export function streamSpecs(catalog: BusCatalog, options: StreamOptions = {}): StreamSpec[] {
  return [
    stepsStreamSpec(catalog, options),
    eventsStreamSpec(catalog, options),
    advisoriesStreamSpec(catalog, options),
  ];
}

/**
 * The durable pull consumer of one resource and priority. Its filter is exactly that priority's
 * subject: filters of a work-queue stream must not overlap, and 2.9 allows one filter per consumer,
 * hence four consumers per resource. Explicit acks and "deliver all" are work-queue rules too.
 */
export function stepConsumerSpec(
  catalog: BusCatalog,
  resource: string,
  priority: Priority,
  options: StepConsumerOptions = {},
): ConsumerSpec {
  return {
    durable_name: catalog.consumers.step(resource, priority),
    filter_subject: catalog.subjects.step(resource, priority),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
    ack_wait: nanos(positiveInt(options.ackWaitMs, DEFAULT_ACK_WAIT_MS, 'ackWaitMs')),
    max_deliver: positiveInt(options.maxDeliver, DEFAULT_MAX_DELIVER, 'maxDeliver'),
    max_ack_pending: positiveInt(options.maxAckPending, DEFAULT_MAX_ACK_PENDING, 'maxAckPending'),
    max_waiting: positiveInt(options.maxWaiting, DEFAULT_MAX_WAITING, 'maxWaiting'),
  };
}

/**
 * The dead-letter worker's durable consumer of the advisories stream. It takes every advisory the
 * stream keeps and retries forever (no `max_deliver`): an advisory dropped here would leave a dead
 * message in the work queue unrecorded.
 */
export function deadLetterConsumerSpec(
  catalog: BusCatalog,
  options: DeadLetterConsumerOptions = {},
): ConsumerSpec {
  return {
    durable_name: catalog.consumers.deadLetters,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    replay_policy: ReplayPolicy.Instant,
    ack_wait: nanos(positiveInt(options.ackWaitMs, DEFAULT_ACK_WAIT_MS, 'ackWaitMs')),
    max_deliver: -1,
    max_ack_pending: DEFAULT_MAX_ACK_PENDING,
    max_waiting: DEFAULT_MAX_WAITING,
  };
}

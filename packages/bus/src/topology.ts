/**
 * Makes the server's streams, consumers and KV buckets match the specs, idempotently.
 *
 * Every service calls these at start, possibly several at once: creating an object someone else
 * just created is answered by reading it again, and an object whose settings drifted from the spec
 * is updated. A setting the server cannot change in place (a stream's retention or storage) fails
 * with a clear `failed_precondition` instead of being papered over.
 */
import { JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerInfo, JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { nanos } from '@nats-io/transport-node';
import { PRIORITIES, SluiceError } from '@sluice/core';
import type { BusCatalog } from './catalog.js';
import {
  deadLetterConsumerSpec,
  DEFAULT_REPLICAS,
  stepConsumerSpec,
  streamSpecs,
} from './specs.js';
import type {
  ConsumerSpec,
  DeadLetterConsumerOptions,
  StepConsumerOptions,
  StreamOptions,
  StreamSpec,
} from './specs.js';

/** What {@link ensureStream} and {@link ensureConsumer} did. */
export type EnsureAction = 'created' | 'updated' | 'unchanged';

const STREAM_NOT_FOUND = 10059;
/** Another stream with this name but a different configuration exists (a concurrent create). */
const STREAM_NAME_IN_USE = 10058;
/** Another stream already listens on one of these subjects (or a concurrent create, see below). */
const STREAM_SUBJECTS_OVERLAP = 10065;
const CONSUMER_NOT_FOUND = 10014;
/** nats-server's default duplicate window, which a bucket with a shorter TTL gets instead. */
const DEFAULT_KV_DUPLICATE_WINDOW_MS = 2 * 60_000;
/** Rounds of read → create/update before giving up on a racing peer. */
const MAX_ROUNDS = 5;

function apiCode(err: unknown): number | undefined {
  return err instanceof JetStreamApiError ? err.code : undefined;
}

/** Whether a JetStream API call failed because its stream does not exist. */
export function isStreamNotFound(err: unknown): boolean {
  return apiCode(err) === STREAM_NOT_FOUND;
}

/**
 * Whether the fields a spec sets have the same values on the server (fields the spec leaves out are
 * the server's business). Subject lists compare as sets.
 */
export function configMatches(spec: object, actual: object): boolean {
  const have = actual as Record<string, unknown>;
  return Object.entries(spec).every(([key, want]) => sameValue(want, have[key]));
}

function sameValue(want: unknown, have: unknown): boolean {
  if (Array.isArray(want)) {
    if (!Array.isArray(have) || have.length !== want.length) return false;
    const sorted = (a: unknown[]): string[] => a.map((v) => JSON.stringify(v)).sort();
    return sorted(want).join('\n') === sorted(have).join('\n');
  }
  return want === have;
}

/**
 * Creates a stream, or updates it to the spec when its settings differ.
 *
 * @throws SluiceError `failed_precondition` when the server refuses the update (e.g. a changed
 *   retention policy) or another stream takes the subjects, or the client's error when the server
 *   cannot be reached.
 */
export async function ensureStream(jsm: JetStreamManager, spec: StreamSpec): Promise<EnsureAction> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const info = await streamInfo(jsm, spec.name);
    if (info === null) {
      try {
        await jsm.streams.add(spec);
        return 'created';
      } catch (err) {
        // Another service created it meanwhile (identical re-adds succeed; a different config
        // answers 10058): read it again and compare. Any other refusal (e.g. 10047, not enough
        // storage) is the answer.
        if (apiCode(err) === STREAM_NAME_IN_USE) continue;
        if (apiCode(err) === STREAM_SUBJECTS_OVERLAP) {
          if ((await streamInfo(jsm, spec.name)) !== null) continue;
          throw overlapping(`stream ${spec.name}`, spec.subjects, err);
        }
        throw err;
      }
    }
    if (configMatches(spec, info.config)) return 'unchanged';
    try {
      await jsm.streams.update(spec.name, spec);
      return 'updated';
    } catch (err) {
      if (apiCode(err) === STREAM_NOT_FOUND) continue;
      throw incompatible(`stream ${spec.name}`, err);
    }
  }
  throw raced(`stream ${spec.name}`);
}

async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | null> {
  try {
    return await jsm.streams.info(name);
  } catch (err) {
    if (apiCode(err) === STREAM_NOT_FOUND) return null;
    throw err;
  }
}

/**
 * Creates a durable consumer, or updates it to the spec when its settings differ. (On 2.9
 * `consumers.add` is an upsert anyway; reading first keeps restarts from touching consumers that
 * are already right and works the same on 2.10+, where a create with a different config fails.)
 */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  spec: ConsumerSpec,
): Promise<EnsureAction> {
  const name = spec.durable_name;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const info = await consumerInfo(jsm, stream, name);
    if (info === null) {
      try {
        await jsm.consumers.add(stream, spec);
        return 'created';
      } catch (err) {
        if (apiCode(err) === undefined || apiCode(err) === STREAM_NOT_FOUND) throw err;
        continue;
      }
    }
    if (configMatches(spec, info.config)) return 'unchanged';
    try {
      await jsm.consumers.update(stream, name, spec);
      return 'updated';
    } catch (err) {
      if (apiCode(err) === CONSUMER_NOT_FOUND) continue;
      throw incompatible(`consumer ${stream} > ${name}`, err);
    }
  }
  throw raced(`consumer ${stream} > ${name}`);
}

async function consumerInfo(
  jsm: JetStreamManager,
  stream: string,
  name: string,
): Promise<ConsumerInfo | null> {
  try {
    return await jsm.consumers.info(stream, name);
  } catch (err) {
    if (apiCode(err) === CONSUMER_NOT_FOUND) return null;
    throw err;
  }
}

function incompatible(what: string, err: unknown): SluiceError {
  const detail = err instanceof Error ? err.message : String(err);
  return new SluiceError(
    'failed_precondition',
    `${what} exists with settings that cannot be changed to the spec (${detail}); ` +
      'migrate or delete it by hand',
    { cause: err },
  );
}

/**
 * A create refused because the subjects are taken. On 2.9 (`server/stream.go`) a new stream joins
 * the account's list only once it is fully set up, so a peer creating the same stream can pass the
 * name check before it joins and meet it at the overlap check just after: the peer is told
 * "subjects overlap" instead of being handed the stream. {@link ensureStream} and `openBucket`
 * therefore call this only when no stream of the wanted name exists, i.e. when a stream of another
 * name owns the subjects.
 */
function overlapping(what: string, subjects: readonly string[], err: unknown): SluiceError {
  return new SluiceError(
    'failed_precondition',
    `${what} cannot be created: another stream already takes its subjects ` +
      `(${subjects.join(', ')}); delete that stream or choose another subject prefix`,
    { cause: err },
  );
}

function raced(what: string): SluiceError {
  return new SluiceError(
    'unavailable',
    `${what} kept changing while being ensured (${MAX_ROUNDS} rounds); ` +
      'is another service applying different settings?',
  );
}

/** Options of {@link ensureTopology}. */
export type TopologyOptions = StreamOptions;

/** What {@link ensureTopology} did to each stream, by stream name. */
export type TopologyReport = Record<string, EnsureAction>;

/**
 * Creates or updates the steps, events and advisories streams.
 *
 * @returns what happened to each stream, by name (for a start-up log line).
 */
export async function ensureTopology(
  jsm: JetStreamManager,
  catalog: BusCatalog,
  options: TopologyOptions = {},
): Promise<TopologyReport> {
  const report: TopologyReport = {};
  for (const spec of streamSpecs(catalog, options)) {
    report[spec.name] = await ensureStream(jsm, spec);
  }
  return report;
}

/**
 * Creates or updates the four durable consumers of a resource (one per priority). Call after
 * {@link ensureTopology}; the steps stream must exist.
 *
 * @returns the durable consumer names, indexed by priority (0 → P0).
 */
export async function ensureStepConsumers(
  jsm: JetStreamManager,
  catalog: BusCatalog,
  resource: string,
  options: StepConsumerOptions = {},
): Promise<string[]> {
  const names: string[] = [];
  for (const priority of PRIORITIES) {
    const spec = stepConsumerSpec(catalog, resource, priority, options);
    await ensureConsumer(jsm, catalog.streams.steps, spec);
    names.push(spec.durable_name);
  }
  return names;
}

/**
 * Creates or updates the dead-letter worker's consumer of the advisories stream. Call after
 * {@link ensureTopology}.
 *
 * @returns the durable consumer name
 */
export async function ensureDeadLetterConsumer(
  jsm: JetStreamManager,
  catalog: BusCatalog,
  options: DeadLetterConsumerOptions = {},
): Promise<string> {
  const spec = deadLetterConsumerSpec(catalog, options);
  await ensureConsumer(jsm, catalog.streams.advisories, spec);
  return spec.durable_name;
}

/** Options of {@link openKvBuckets}. */
export interface KvBucketOptions {
  /** Lease time-to-live in milliseconds: the leases bucket's TTL (its stream's `max_age`). */
  readonly leaseTtlMs: number;
  /** Replicas of both buckets (default {@link DEFAULT_REPLICAS}). */
  readonly replicas?: number;
}

/** The two KV buckets of a deployment. */
export interface KvBuckets {
  /** Leader leases; a key not renewed within the lease TTL disappears. */
  readonly leases: KV;
  /** The governor's live decisions; no TTL. */
  readonly governor: KV;
}

/** A KV bucket is stored in the stream `KV_<bucket>`. */
export function kvStreamName(bucket: string): string {
  return `KV_${bucket}`;
}

/**
 * Opens (creating if needed) the leases and governor buckets.
 *
 * `Kvm.create` binds to an existing bucket without looking at its settings, so a changed lease TTL
 * would silently keep the old one; the bucket's stream is brought to the wanted `max_age`, history
 * and replicas here first. On 2.9 the bucket TTL is the only expiry there is (per-key TTLs are
 * ignored), and it must equal the lease TTL.
 *
 * @throws SluiceError `invalid_argument` for a lease TTL under one second.
 */
export async function openKvBuckets(
  nc: NatsConnection,
  catalog: BusCatalog,
  options: KvBucketOptions,
): Promise<KvBuckets> {
  const { leaseTtlMs } = options;
  if (!Number.isSafeInteger(leaseTtlMs) || leaseTtlMs < 1_000) {
    throw new SluiceError('invalid_argument', `leaseTtlMs must be ≥ 1000, got ${leaseTtlMs}`, {
      field: 'leaseTtlMs',
    });
  }
  const replicas = options.replicas ?? DEFAULT_REPLICAS;
  const jsm = await jetstreamManager(nc);
  const kvm = new Kvm(nc);
  const leases = await openBucket(jsm, kvm, catalog.buckets.leases, {
    history: 1,
    ttl: leaseTtlMs,
    replicas,
  });
  const governor = await openBucket(jsm, kvm, catalog.buckets.governor, {
    history: 1,
    ttl: 0,
    replicas,
  });
  return { leases, governor };
}

interface BucketSettings {
  readonly history: number;
  /** Milliseconds; 0 for none. */
  readonly ttl: number;
  readonly replicas: number;
}

async function openBucket(
  jsm: JetStreamManager,
  kvm: Kvm,
  bucket: string,
  settings: BucketSettings,
): Promise<KV> {
  const stream = kvStreamName(bucket);
  const wanted: Partial<StreamConfig> = {
    max_msgs_per_subject: settings.history,
    max_age: nanos(settings.ttl),
    num_replicas: settings.replicas,
    // The server gives a new bucket with a TTL a duplicate window of that TTL (two minutes at
    // most) and refuses a max age below the window (10052), so a shortened TTL takes the window
    // with it; the window is what a new bucket of this TTL would get.
    ...(settings.ttl > 0
      ? { duplicate_window: nanos(Math.min(settings.ttl, DEFAULT_KV_DUPLICATE_WINDOW_MS)) }
      : {}),
  };
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const info = await streamInfo(jsm, stream);
    if (info === null) {
      try {
        return await kvm.create(bucket, settings);
      } catch (err) {
        // Lost a creation race to a peer (with other settings, or 2.9's "subjects overlap" race
        // that ensureStream describes): read again and converge. A bucket stream that still does
        // not exist after an overlap is no race: a stream of another name takes its subjects.
        const code = apiCode(err);
        if (code === undefined) throw err;
        if (code === STREAM_SUBJECTS_OVERLAP && (await streamInfo(jsm, stream)) === null) {
          throw overlapping(`KV bucket ${bucket}`, [`$KV.${bucket}.>`], err);
        }
        continue;
      }
    }
    if (!configMatches(wanted, info.config)) {
      try {
        await jsm.streams.update(stream, wanted);
      } catch (err) {
        if (apiCode(err) === STREAM_NOT_FOUND) continue;
        throw incompatible(`KV bucket ${bucket}`, err);
      }
    }
    // `create` binds to the existing bucket (and picks up its direct-get setting).
    return kvm.create(bucket, settings);
  }
  throw raced(`KV bucket ${bucket}`);
}

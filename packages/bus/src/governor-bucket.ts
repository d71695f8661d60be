/**
 * Reading the governor's decisions bucket from the services that do not own it (the gateway and
 * the executors), without creating it: they do not know the settings its owner creates it with,
 * and reads fail as "missing" until the governor first leads.
 *
 * Reads must never reach a bucket's stream through `$JS.API.STREAM.MSG.GET` while the stream is
 * being created. nats-server 2.9.10 lists a new stream before its store exists, and a message get
 * in that window dereferences the missing store: the server panics and exits, dropping every
 * client (`jsMsgGetRequest`; reproduced in `governor-bucket.test.ts`). A stack whose services start
 * together hits the window when a reader's first read meets the governor's first lead. A KV bound
 * without looking at its stream (`Kvm.open`) reads that way, so this module binds only after the
 * stream's info was read, with the stream's own direct-get setting: direct gets are answered by
 * the stream itself, which subscribes to them only once its store is set up. A direct get cannot
 * tell a missing stream, though: nothing answers it, and the JetStream API's interest in
 * `$JS.API.>` keeps the server from saying "no responders", so it waits out the request timeout —
 * hence the info read first, whose "stream not found" is immediate.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { BusCatalog } from './catalog.js';
import { isStreamNotFound, kvStreamName } from './topology.js';

/** Reads one key of the governor's bucket at a time. */
export interface GovernorBucketReader {
  /**
   * The key's latest entry, or `null` when the bucket has none.
   * @throws what {@link isMissingGovernorBucket} recognises while the bucket does not exist yet.
   */
  get(key: string): Promise<KvEntry | null>;
}

export function openGovernorBucket(nc: NatsConnection, catalog: BusCatalog): GovernorBucketReader {
  const bucket = catalog.buckets.governor;
  const stream = kvStreamName(bucket);
  const kvm = new Kvm(nc);
  // Without the account-info check, which would cost a request and can fail: nothing to keep.
  const manager = jetstreamManager(nc, { checkAPI: false });

  return {
    // The info is read before every read, not once: the bucket may be lost with JetStream's store
    // and created again, and a direct get of it meanwhile would wait out its timeout. Reads are
    // rare (one at a service's start, one per `GetPressure`).
    async get(key) {
      // Throws "stream not found" while the governor has not created its bucket.
      const info = await (await manager).streams.info(stream);
      const kv = await kvm.open(bucket, { allow_direct: info.config.allow_direct === true });
      return kv.get(key);
    },
  };
}

/**
 * Whether a read of the bucket {@link openGovernorBucket} opened failed because the bucket does
 * not exist yet: no governor has led (the governor creates it), which is no fault.
 */
export function isMissingGovernorBucket(error: unknown): boolean {
  return isStreamNotFound(error);
}

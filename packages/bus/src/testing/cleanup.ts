/**
 * Removes what tests leave on a shared NATS server: the streams (`<PREFIX>_*`, or a test's own
 * `<prefix>_*`: stream names are case-sensitive and the prefix is matched in either case) and KV
 * buckets (`KV_<prefix>_*`) of a test's prefix. JetStream reserves each stream's `max_bytes` of the
 * server's store, so leftovers would soon make new streams fail with "insufficient storage".
 */
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

/** Test prefixes start with this (see `uniquePrefix`). */
const TEST_PREFIX_START = 't_';

/** Deletes every stream and KV bucket of `prefix`; returns how many it deleted. */
export async function deletePrefixResources(url: string, prefix: string): Promise<number> {
  return withManager(url, (jsm) => deleteStreamsWhere(jsm, (name) => ownedBy(name, prefix)));
}

/**
 * Deletes the streams and buckets of test prefixes created more than `olderThanMs` ago: what
 * crashed or interrupted tests left behind. Recent ones may belong to a test still running.
 */
export async function deleteStaleTestResources(url: string, olderThanMs: number): Promise<number> {
  const cutoff = Date.now() - olderThanMs;
  return withManager(url, (jsm) =>
    deleteStreamsWhere(
      jsm,
      (name, created) =>
        (name.toUpperCase().startsWith(TEST_PREFIX_START.toUpperCase()) ||
          name.startsWith(`KV_${TEST_PREFIX_START}`)) &&
        created < cutoff,
    ),
  );
}

function ownedBy(stream: string, prefix: string): boolean {
  return (
    stream.toUpperCase().startsWith(`${prefix.toUpperCase()}_`) ||
    stream.startsWith(`KV_${prefix}_`)
  );
}

async function deleteStreamsWhere(
  jsm: JetStreamManager,
  doomed: (name: string, createdMs: number) => boolean,
): Promise<number> {
  const names: string[] = [];
  for await (const stream of jsm.streams.list()) {
    if (doomed(stream.config.name, Date.parse(stream.created))) names.push(stream.config.name);
  }
  for (const name of names) await jsm.streams.delete(name);
  return names.length;
}

async function withManager<T>(url: string, use: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
  const nc = await connect({ servers: url, name: 'sluice-test-cleanup' });
  try {
    return await use(await jetstreamManager(nc));
  } finally {
    await nc.close();
  }
}

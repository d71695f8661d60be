/**
 * Reading one message of a stream by its sequence, in a way nats-server 2.9.10 survives whatever the
 * stream is going through.
 *
 * `$JS.API.STREAM.MSG.GET` must not reach a stream that is being created: 2.9.10 lists a new stream
 * before its store exists, and a message get in that window dereferences the missing store — the
 * server panics and exits (docs/decisions.md, "Readers of the governor's bucket"). The steps stream
 * is created again whenever JetStream has lost its store, while the reconciler may be reading it.
 * A direct get (`$JS.API.DIRECT.GET.<stream>`) is answered by the stream itself once its store is
 * ready, so it cannot meet the window; but nothing answers a direct get of a missing stream (not
 * even "no responders": the JetStream API listens on `$JS.API.>`), so it would wait out its
 * timeout. Hence the stream's info first, whose "stream not found" comes at once, then a direct get
 * where the stream allows one (Sluice's steps stream does). A read that falls in the creation
 * window itself times out, a failed read like any other.
 */
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';

/**
 * The message at `seq` in `stream`, or `null` when there is none (acknowledged and removed, or
 * never there).
 * @throws the JetStream API's "stream not found" when the stream does not exist.
 */
export async function readStreamMessage(
  jsm: JetStreamManager,
  stream: string,
  seq: number,
): Promise<StoredMsg | null> {
  const info = await jsm.streams.info(stream);
  return info.config.allow_direct === true
    ? jsm.direct.getMessage(stream, { seq })
    : // A stream without direct gets (one Sluice did not create) is read the only way it can be.
      jsm.streams.getMessage(stream, { seq });
}

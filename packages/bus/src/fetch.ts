/**
 * Pulling a bounded batch from a JetStream consumer without the v3 client's fail-fast surprise:
 * a non-ordered `fetch()` / `next()` throws `JetStreamError: heartbeats missed` when two idle
 * heartbeats do not arrive (NATS-NOTES §"fetch"). Its idle heartbeat defaults to half the
 * request's `expires`, so the client's give-up timer fires at the very moment the server's own
 * expiry (a 408) is due — on a loaded machine either one wins. For a bounded pull both mean the
 * same thing, "nothing more in this batch", so this module reports them alike.
 */
import { JetStreamError, type Consumer, type JsMsg } from '@nats-io/jetstream';

/** What one pull asks for. */
export interface PullOptions {
  /** Most messages in the batch. */
  readonly maxMessages: number;
  /** How long the server holds the pull open (≥ 1000 ms, the client's minimum). */
  readonly expiresMs: number;
}

/** True for the client's "two idle heartbeats missed" end of a fetch/next. */
export function isHeartbeatsMissed(error: unknown): boolean {
  return error instanceof JetStreamError && error.message === 'heartbeats missed';
}

/**
 * Fetches one batch and hands each message to `handle` in order, awaiting it; returns how many
 * messages came. Missed heartbeats end the batch like an expiry; any other error is thrown.
 */
export async function fetchEach(
  consumer: Consumer,
  options: PullOptions,
  handle: (message: JsMsg) => Promise<void> | void,
): Promise<number> {
  const messages = await consumer.fetch({
    max_messages: options.maxMessages,
    expires: options.expiresMs,
  });
  let count = 0;
  try {
    for await (const message of messages) {
      count += 1;
      await handle(message);
    }
  } catch (error) {
    if (!isHeartbeatsMissed(error)) throw error;
  }
  return count;
}

/** Pulls at most one message; null when none came before the expiry (or the heartbeats). */
export async function nextOrNull(consumer: Consumer, expiresMs: number): Promise<JsMsg | null> {
  try {
    return await consumer.next({ expires: expiresMs });
  } catch (error) {
    if (isHeartbeatsMissed(error)) return null;
    throw error;
  }
}

/**
 * Publishing to a JetStream stream so that retries cannot duplicate (NATS-NOTES.md §3).
 *
 * A publish whose acknowledgement times out may still have been stored. Retrying with the same
 * message id (`Nats-Msg-Id`) lets the stream recognise the repeat within its duplicate window and
 * answer `duplicate: true` with the original sequence, so the caller gets one sequence either way.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamClient } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';
import { SluiceError } from '@sluice/core';
import type { SluiceErrorCode } from '@sluice/core';

/** Per-attempt wait for the stream's acknowledgement, in milliseconds. */
export const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;
/** Attempts before {@link publishDurable} gives up. */
export const DEFAULT_PUBLISH_ATTEMPTS = 3;
/** Pause before the second attempt, doubled for each further one (capped at 2 s). */
export const DEFAULT_PUBLISH_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2_000;

/** Options of {@link publishDurable}. */
export interface PublishDurableOptions {
  /** The message id the stream de-duplicates by; the same on every attempt. Required. */
  readonly msgID: string;
  /** Headers to send (e.g. from `injectTraceContext`). `Nats-Msg-Id` is added to them. */
  readonly headers?: MsgHdrs;
  /** Per-attempt acknowledgement timeout (default {@link DEFAULT_PUBLISH_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Attempts in all (default {@link DEFAULT_PUBLISH_ATTEMPTS}). */
  readonly attempts?: number;
  /** First retry pause, doubled each time (default {@link DEFAULT_PUBLISH_BACKOFF_MS}). */
  readonly backoffMs?: number;
}

/** The stream's acknowledgement. */
export interface PublishDurableResult {
  readonly stream: string;
  /** The message's sequence in the stream (the original's, for a duplicate). */
  readonly seq: number;
  /** True when the stream already had this message id: nothing new was stored. */
  readonly duplicate: boolean;
}

/**
 * A publish that did not get stored. `code` says what to do:
 * - `resource_exhausted` — the stream is full (`discard: new` refused it): back off and try later;
 * - `unavailable` — no acknowledgement after every attempt (server down, no quorum, no stream):
 *   the message may or may not be stored, so the caller must keep its own record and retry later
 *   with the same `msgID`;
 * - `invalid_argument` — the message is larger than the stream allows;
 * - `internal` — any other refusal by the server.
 */
export class BusPublishError extends SluiceError {
  readonly subject: string;
  readonly msgID: string;
  /** Attempts made. */
  readonly attempts: number;

  constructor(
    code: SluiceErrorCode,
    subject: string,
    msgID: string,
    attempts: number,
    cause: unknown,
  ) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(
      code,
      `publish to ${subject} (msg id ${msgID}) failed after ${attempts} attempt(s): ${detail}`,
      {
        cause,
      },
    );
    this.subject = subject;
    this.msgID = msgID;
    this.attempts = attempts;
  }
}

/** nats-server's JSStreamStoreFailedF: used for "maximum messages/bytes exceeded" among others. */
const STORE_FAILED = 10077;
/** JSStreamMessageExceedsMaximumErr. */
const MESSAGE_TOO_LARGE = 10054;

/** Whether another attempt may help: no acknowledgement yet, or no responder (no quorum/stream). */
function isTransient(err: unknown): boolean {
  if (err instanceof TimeoutError) return true;
  // The client turns "no responders" into JetStreamNotEnabled; after losing quorum the server looks
  // exactly like that for a few seconds (NATS-NOTES.md §10, item 9).
  return err instanceof Error && err.name === 'JetStreamNotEnabled';
}

function codeFor(err: unknown): SluiceErrorCode {
  if (err instanceof JetStreamApiError) {
    if (err.code === STORE_FAILED && /maximum (messages|bytes)/i.test(err.message)) {
      return 'resource_exhausted';
    }
    if (err.code === MESSAGE_TOO_LARGE) return 'invalid_argument';
    return 'internal';
  }
  // Timeouts, no responders, a closed or draining connection.
  return 'unavailable';
}

function positiveInt(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new SluiceError('invalid_argument', `${field} must be a positive integer, got ${value}`, {
      field,
    });
  }
  return value;
}

/**
 * Publishes `data` to a stream subject, retrying on timeouts with the same message id.
 *
 * @returns the stream's acknowledgement; `duplicate` is true when an earlier attempt (or an earlier
 *   call with the same `msgID` within the duplicate window) already stored it.
 * @throws BusPublishError when it could not be stored (see its `code`).
 */
export async function publishDurable(
  js: JetStreamClient,
  subject: string,
  data: Uint8Array,
  options: PublishDurableOptions,
): Promise<PublishDurableResult> {
  const { msgID, headers } = options;
  if (typeof msgID !== 'string' || msgID.length === 0) {
    throw new SluiceError('invalid_argument', 'msgID is required', { field: 'msgID' });
  }
  const timeout = positiveInt(options.timeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS, 'timeoutMs');
  const attempts = positiveInt(options.attempts ?? DEFAULT_PUBLISH_ATTEMPTS, 'attempts');
  const backoffMs = options.backoffMs ?? DEFAULT_PUBLISH_BACKOFF_MS;

  for (let attempt = 1; ; attempt++) {
    try {
      const ack = await js.publish(subject, data, {
        msgID,
        timeout,
        ...(headers === undefined ? {} : { headers }),
      });
      return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
    } catch (err) {
      if (!isTransient(err) || attempt >= attempts) {
        throw new BusPublishError(codeFor(err), subject, msgID, attempt, err);
      }
      await sleep(Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** (attempt - 1)));
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

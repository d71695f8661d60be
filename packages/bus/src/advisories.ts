/**
 * The JetStream advisories that the advisories stream keeps: a step message that exhausted
 * `max_deliver` (it stays in the work-queue stream, to be copied into `dead_letters` and deleted)
 * and one an executor terminated (already gone from the stream; the executor recorded it first).
 */
import { BusMessageError } from './messages.js';

/** What happened to a step message. */
export type StepAdvisoryKind = 'max_deliveries' | 'terminated';

/** One advisory about a step message, reduced to what the dead-letter worker needs. */
export interface StepAdvisory {
  readonly kind: StepAdvisoryKind;
  /** The stream of the step message (the steps stream). */
  readonly stream: string;
  /** The durable consumer that delivered it (tells resource and priority). */
  readonly consumer: string;
  /** The step message's sequence in its stream: fetch it by this. */
  readonly stream_seq: number;
  /** How many times it was delivered. */
  readonly deliveries: number;
}

/** The `type` of each advisory payload, as nats-server 2.9 writes it. */
const ADVISORY_TYPES: Readonly<Record<string, StepAdvisoryKind>> = {
  'io.nats.jetstream.advisory.v1.max_deliver': 'max_deliveries',
  'io.nats.jetstream.advisory.v1.terminated': 'terminated',
};

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes a MAX_DELIVERIES or MSG_TERMINATED advisory.
 *
 * @param subject where it was published (for errors)
 * @throws BusMessageError for anything else or a malformed payload
 */
export function decodeStepAdvisory(subject: string, data: Uint8Array): StepAdvisory {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(data));
  } catch (err) {
    throw new BusMessageError(subject, 'advisory is not UTF-8 JSON', { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null) {
    throw new BusMessageError(subject, 'advisory is not a JSON object');
  }
  const a = parsed as Record<string, unknown>;
  const kind = typeof a.type === 'string' ? ADVISORY_TYPES[a.type] : undefined;
  if (kind === undefined) {
    throw new BusMessageError(subject, `unexpected advisory type ${JSON.stringify(a.type)}`);
  }
  const { stream, consumer, stream_seq, deliveries } = a;
  if (typeof stream !== 'string' || stream.length === 0) {
    throw new BusMessageError(subject, 'advisory has no stream');
  }
  if (typeof consumer !== 'string' || consumer.length === 0) {
    throw new BusMessageError(subject, 'advisory has no consumer');
  }
  if (!isPositiveInt(stream_seq)) {
    throw new BusMessageError(subject, 'advisory stream_seq must be a positive integer');
  }
  if (!isPositiveInt(deliveries)) {
    throw new BusMessageError(subject, 'advisory deliveries must be a positive integer');
  }
  return { kind, stream, consumer, stream_seq, deliveries };
}

function isPositiveInt(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

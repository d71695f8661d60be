/**
 * What each scheduler's urgent-wait guard caps, told to the gateways on `guardCaps` (core NATS), so
 * `GetTask` can say why a P1–P3 task waits beyond its turn: P0 steps on its resource wait longer
 * than their target, and the guard holds (cap 0) or limits lower priorities there.
 *
 * The caps live in each scheduler replica's memory (each caps its own claims). A scheduler sends
 * its caps after every reading while any is in place (every 250 ms), and once more, empty, when it
 * lifts the last; a view forgets a scheduler it has not heard from for {@link GUARD_CAPS_FRESH_MS},
 * so a stopped or crashed scheduler's caps do not explain waits for long. A lost notice only delays
 * the explanation: none of this decides admission.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { resourceProblem, SluiceError } from '@sluice/core';
import {
  encodeJsonPayload,
  jsonObject,
  parseJsonPayload,
  type JsonPayloadKind,
} from './json-payload.js';

/** One scheduler's caps of P1–P3 steps in flight, by resource (no entry: not capped). */
export interface GuardCapsNotice {
  /** Unique per scheduler process. */
  readonly scheduler_id: string;
  readonly caps: Readonly<Record<string, number>>;
}

/** How long a scheduler's last notice stands. */
export const GUARD_CAPS_FRESH_MS = 2_000;

/** Largest notice accepted. */
export const MAX_GUARD_CAPS_BYTES = 16 * 1024;

const NOTICE_PAYLOAD: JsonPayloadKind = {
  what: 'guard caps notice',
  field: 'notice',
  maxBytes: MAX_GUARD_CAPS_BYTES,
  invalid,
};

/**
 * Encodes a notice after checking it.
 *
 * @throws SluiceError `invalid_argument` naming the field when the notice is malformed.
 */
export function encodeGuardCaps(notice: GuardCapsNotice): Uint8Array {
  return encodeJsonPayload(parseGuardCaps(notice));
}

/**
 * Decodes and validates a notice; unknown fields are dropped.
 *
 * @throws SluiceError `invalid_argument` naming the field when the bytes are not a valid notice.
 */
export function decodeGuardCaps(data: Uint8Array): GuardCapsNotice {
  return parseGuardCaps(parseJsonPayload(data, NOTICE_PAYLOAD));
}

function parseGuardCaps(value: unknown): GuardCapsNotice {
  const v = jsonObject(value, 'notice', NOTICE_PAYLOAD);
  const id = v.scheduler_id;
  if (typeof id !== 'string' || id.length === 0 || id.length > 200) {
    throw invalid('scheduler_id', 'must be a string of 1 to 200 characters');
  }
  const caps: Record<string, number> = {};
  for (const [resource, cap] of Object.entries(jsonObject(v.caps, 'caps', NOTICE_PAYLOAD))) {
    if (resourceProblem(resource)) throw invalid('caps', `has an invalid resource "${resource}"`);
    if (typeof cap !== 'number' || !Number.isSafeInteger(cap) || cap < 0) {
      throw invalid(`caps.${resource}`, 'must be a whole number ≥ 0');
    }
    caps[resource] = cap;
  }
  return { scheduler_id: id, caps };
}

function invalid(field: string, problem: string): SluiceError {
  return new SluiceError('invalid_argument', `guard caps notice ${field} ${problem}`, { field });
}

/** The gateways' view of every scheduler's caps. */
export interface GuardCapsView {
  /**
   * The lowest cap of P1–P3 steps in flight any scheduler heard from lately puts on `resource`;
   * `undefined` when none caps it.
   */
  capOf(resource: string): number | undefined;
  /** Every capped resource with its lowest cap, as {@link capOf} gives it, by resource name. */
  all(): Readonly<Record<string, number>>;
  stop(): void;
}

/** Options of {@link startGuardCapsView}. */
export interface GuardCapsViewOptions {
  readonly nc: NatsConnection;
  /** `catalog.subjects.guardCaps`. */
  readonly subject: string;
  readonly log: { warn(fields: Record<string, unknown>, message: string): void };
  /** Default {@link GUARD_CAPS_FRESH_MS}. */
  readonly freshMs?: number;
  /** The clock, for tests. */
  readonly now?: () => number;
}

/** Subscribes to the schedulers' notices and keeps the latest of each. */
export function startGuardCapsView(options: GuardCapsViewOptions): GuardCapsView {
  const freshMs = options.freshMs ?? GUARD_CAPS_FRESH_MS;
  const now = options.now ?? Date.now;
  const latest = new Map<string, { caps: Readonly<Record<string, number>>; at: number }>();
  /** Each resource's lowest cap among the schedulers heard from lately, forgetting the others. */
  const lowestCaps = (): Record<string, number> => {
    const at = now();
    const lowest: Record<string, number> = {};
    for (const [scheduler, entry] of latest) {
      if (at - entry.at > freshMs) {
        latest.delete(scheduler);
        continue;
      }
      for (const [resource, cap] of Object.entries(entry.caps)) {
        lowest[resource] = Math.min(cap, lowest[resource] ?? cap);
      }
    }
    return lowest;
  };
  const subscription: Subscription = options.nc.subscribe(options.subject, {
    callback: (error, message) => {
      if (error) return options.log.warn({ err: error }, 'guard caps subscription failed');
      try {
        const notice = decodeGuardCaps(message.data);
        if (Object.keys(notice.caps).length === 0) latest.delete(notice.scheduler_id);
        else latest.set(notice.scheduler_id, { caps: notice.caps, at: now() });
        // Schedulers that stopped without a lift are forgotten here too, not only when asked.
        lowestCaps();
      } catch (decodeError) {
        options.log.warn({ err: decodeError }, 'ignored a malformed guard caps notice');
      }
    },
  });
  return {
    capOf(resource) {
      return lowestCaps()[resource];
    },
    all() {
      const lowest = Object.entries(lowestCaps());
      return Object.fromEntries(lowest.sort(([a], [b]) => a.localeCompare(b)));
    },
    stop() {
      subscription.unsubscribe();
    },
  };
}

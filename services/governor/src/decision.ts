/**
 * The governor's decision document: what it stores in the governor KV bucket under
 * {@link DECISIONS_KEY} and publishes on the `governorDecisions` subject.
 *
 * One JSON object with snake_case fields, read by the gateway (admission) and the scheduler (holds)
 * in later issues. It carries the leader epoch from Postgres, so a writer can tell whether the
 * document it is about to replace came from a newer leader (fencing), and readers can ignore a
 * document older than one they have already seen.
 *
 * ```json
 * { "epoch": 7, "holder": "governor-host-123-ab12cd34", "level": "normal", "holds": [],
 *   "reject": [], "decided_at": "2025-01-01T00:00:00.000Z", "reasons": ["no pressure signals yet"] }
 * ```
 */
import { isPriority, SluiceError } from '@sluice/core';
import type { Priority } from '@sluice/core';

/** The KV key of the live decision in the governor bucket. */
export const DECISIONS_KEY = 'decisions';

/**
 * The graded backpressure levels of the architecture, mildest first. `normal` means no pressure:
 * every priority is admitted.
 */
export const AdmissionLevel = {
  Normal: 'normal',
  Throttle: 'throttle',
  Degrade: 'degrade',
  Hold: 'hold',
  Reject: 'reject',
} as const;
export type AdmissionLevel = (typeof AdmissionLevel)[keyof typeof AdmissionLevel];

/** Every {@link AdmissionLevel}, mildest first. */
export const ADMISSION_LEVELS: readonly AdmissionLevel[] = Object.values(AdmissionLevel);

/** One decision of the leading governor. */
export interface GovernorDecision {
  /** The leader epoch (from Postgres) of the governor that wrote it: the fencing token. */
  readonly epoch: number;
  /** The lease holder id of the governor that wrote it, for people and logs. */
  readonly holder: string;
  /** The overall backpressure level. */
  readonly level: AdmissionLevel;
  /** Priorities (0–3) whose ready steps the scheduler must not admit now, ascending. */
  readonly holds: readonly Priority[];
  /** Priorities whose `CreateTask` the gateway answers with `RESOURCE_EXHAUSTED`, ascending. */
  readonly reject: readonly Priority[];
  /** When the decision was made, ISO 8601; refreshed on every publication. */
  readonly decided_at: string;
  /** Why, in words: the signals behind the level. */
  readonly reasons: readonly string[];
}

/** The reason given while the governor reads no signals yet. */
export const NO_SIGNALS_REASON = 'no pressure signals yet';

/**
 * The decision while no pressure signal is measured yet: admit everything.
 *
 * @param at when the decision is made (default now)
 */
export function normalDecision(
  epoch: number,
  holder: string,
  at: Date = new Date(),
): GovernorDecision {
  return {
    epoch,
    holder,
    level: AdmissionLevel.Normal,
    holds: [],
    reject: [],
    decided_at: at.toISOString(),
    reasons: [NO_SIGNALS_REASON],
  };
}

/** Largest encoded decision {@link decodeDecision} accepts. */
export const MAX_DECISION_BYTES = 16 * 1024;
const MAX_HOLDER_LENGTH = 200;
const MAX_REASONS = 32;
const MAX_REASON_LENGTH = 500;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Encodes a decision as UTF-8 JSON, after checking it.
 *
 * @throws SluiceError `invalid_argument` naming the field when the decision is malformed.
 */
export function encodeDecision(decision: GovernorDecision): Uint8Array {
  return encoder.encode(JSON.stringify(parseDecision(decision)));
}

/**
 * Decodes and validates a stored or published decision. Returns a fresh object holding only the
 * known fields: unknown fields from a newer writer are dropped, not trusted.
 *
 * @throws SluiceError `invalid_argument` naming the field when the bytes are not a valid decision.
 */
export function decodeDecision(data: Uint8Array): GovernorDecision {
  if (data.byteLength > MAX_DECISION_BYTES) {
    throw invalid('decision', `is ${data.byteLength} bytes, more than ${MAX_DECISION_BYTES}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(data));
  } catch (cause) {
    throw new SluiceError('invalid_argument', 'governor decision is not UTF-8 JSON', {
      field: 'decision',
      cause,
    });
  }
  return parseDecision(value);
}

/**
 * Validates an already parsed value as a decision.
 *
 * @throws SluiceError `invalid_argument` naming the field when it is not a valid decision.
 */
export function parseDecision(value: unknown): GovernorDecision {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid('decision', 'must be a JSON object');
  }
  const v = value as Record<string, unknown>;
  const { epoch, holder, level, decided_at: decidedAt } = v;
  if (typeof epoch !== 'number' || !Number.isSafeInteger(epoch) || epoch < 1) {
    throw invalid('epoch', 'must be a whole number ≥ 1');
  }
  if (typeof holder !== 'string' || holder.length === 0 || holder.length > MAX_HOLDER_LENGTH) {
    throw invalid('holder', `must be a string of 1 to ${MAX_HOLDER_LENGTH} characters`);
  }
  if (!(ADMISSION_LEVELS as readonly unknown[]).includes(level)) {
    throw invalid('level', `must be one of ${ADMISSION_LEVELS.join(', ')}`);
  }
  if (typeof decidedAt !== 'string' || Number.isNaN(Date.parse(decidedAt))) {
    throw invalid('decided_at', 'must be an ISO 8601 time');
  }
  return {
    epoch,
    holder,
    level: level as AdmissionLevel,
    holds: priorities(v.holds, 'holds'),
    reject: priorities(v.reject, 'reject'),
    decided_at: decidedAt,
    reasons: reasons(v.reasons),
  };
}

/** A set of priorities, as an ascending array without repeats. */
function priorities(value: unknown, field: string): Priority[] {
  if (!Array.isArray(value) || !value.every(isPriority)) {
    throw invalid(field, 'must be an array of priorities 0 to 3');
  }
  return [...new Set(value)].sort((a, b) => a - b);
}

function reasons(value: unknown): string[] {
  if (
    !Array.isArray(value) ||
    value.length > MAX_REASONS ||
    !value.every((r) => typeof r === 'string' && r.length <= MAX_REASON_LENGTH)
  ) {
    throw invalid(
      'reasons',
      `must be an array of at most ${MAX_REASONS} strings of at most ${MAX_REASON_LENGTH} characters`,
    );
  }
  return [...(value as string[])];
}

function invalid(field: string, problem: string): SluiceError {
  return new SluiceError('invalid_argument', `governor decision ${field} ${problem}`, { field });
}

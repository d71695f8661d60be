/**
 * The governor's decision document: what it stores in the governor KV bucket under
 * {@link DECISIONS_KEY} and publishes on the `governorDecisions` subject.
 *
 * One JSON object with snake_case fields, read by the gateway (rejects), the scheduler (holds,
 * throttles, limits, open breakers) and the executors (degrade). It carries the leader epoch from
 * Postgres, so a writer can tell whether the document it is about to replace came from a newer
 * leader (fencing), and readers can ignore a document older than one they have already seen.
 * Fields added after the first version are optional on the wire and read as "nothing".
 *
 * ```json
 * { "epoch": 7, "holder": "governor-host-123-ab12cd34", "level": "hold", "holds": [3],
 *   "reject": [], "retry_after_ms": 0, "throttle": [3], "degrade": [2, 3],
 *   "limits": { "llm": 12, "tool:search": 1 }, "breakers": { "tool:search": "half_open" },
 *   "signals": [{ "signal": "llm_rate_limit", "scope": "llm", "value": 0.31, "level": "hold_p3" }],
 *   "decided_at": "2025-01-01T00:00:00.000Z", "reasons": ["llm_rate_limit llm 0.31 ≥ 0.3"] }
 * ```
 */
import { isPriority, resourceProblem, SluiceError } from '@sluice/core';
import {
  encodeJsonPayload,
  jsonObject,
  parseJsonPayload,
  type JsonPayloadKind,
} from './json-payload.js';
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
  /** How long a rejected caller should wait before trying again, in ms (0 when nothing is rejected). */
  readonly retry_after_ms?: number;
  /** Priorities the scheduler keeps out of the last share of each resource's limit (throttled). */
  readonly throttle?: readonly Priority[];
  /** Priorities whose handlers are told to take their degraded (cheaper) path. */
  readonly degrade?: readonly Priority[];
  /**
   * In-flight limits by resource that admission must not exceed, below any configured limit: the
   * adaptive LLM limit, a manual override, a half-open breaker's probe count.
   */
  readonly limits?: Readonly<Record<string, number>>;
  /** Breakers that are not closed, by resource: `open` admits nothing, `half_open` its probes. */
  readonly breakers?: Readonly<Record<string, BreakerView>>;
  /** The signal readings behind the decision, for AdminService and `sluice pressure`. */
  readonly signals?: readonly SignalReading[];
}

/** A breaker as admission sees it (closed breakers are left out of the document). */
export type BreakerView = 'open' | 'half_open';

/**
 * What a decision asks of a claim, in the terms of the claim's settings (`AdmissionSettings` of
 * `@sluice/db`): held priorities are not admitted, resources with open breakers admit nothing, the
 * decision's limits cap their resources, and throttled priorities leave the throttle reserve free.
 * The scheduler's claims and the gateway's claim of a create's P0 steps both apply it.
 */
export interface DecidedAdmission {
  readonly heldPriorities: readonly Priority[];
  readonly closedResources: readonly string[];
  readonly resourceLimits: Readonly<Record<string, number>>;
  readonly throttledPriorities: readonly Priority[];
}

export function decidedAdmission(decision: GovernorDecision): DecidedAdmission {
  return {
    heldPriorities: decision.holds,
    closedResources: Object.entries(decision.breakers ?? {})
      .filter(([, view]) => view === 'open')
      .map(([resource]) => resource),
    resourceLimits: decision.limits ?? {},
    throttledPriorities: decision.throttle ?? [],
  };
}

/** One reading of one signal and the level it maps to. */
export interface SignalReading {
  /** The signal's name, e.g. `queue_depth` or `llm_rate_limit`. */
  readonly signal: string;
  /** What it was measured over: `all`, a resource, a priority (`P0`), a tool. */
  readonly scope: string;
  readonly value: number;
  /** The pressure level the signal is at (after hysteresis). */
  readonly level: string;
}

/** The optional parts of a decision when they decide nothing. */
export const NOTHING_DECIDED = {
  retry_after_ms: 0,
  throttle: [],
  degrade: [],
  limits: {},
  breakers: {},
  signals: [],
} as const satisfies Partial<GovernorDecision>;

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
    ...NOTHING_DECIDED,
  };
}

/**
 * Whether two decisions are the same whenever each was made (`decided_at` aside); with
 * `readings: false`, whatever their signals' readings too — whether they decide the same.
 */
export function sameDecision(
  a: GovernorDecision,
  b: GovernorDecision,
  options: { readonly readings: boolean },
): boolean {
  const compared = ({ decided_at: _at, signals, ...rest }: GovernorDecision) =>
    options.readings ? { ...rest, signals } : rest;
  return JSON.stringify(compared(a)) === JSON.stringify(compared(b));
}

/** Largest encoded decision {@link decodeDecision} accepts. */
export const MAX_DECISION_BYTES = 16 * 1024;
const MAX_HOLDER_LENGTH = 200;
const MAX_REASONS = 32;
const MAX_REASON_LENGTH = 500;
const MAX_ENTRIES = 256;
const MAX_NAME_LENGTH = 200;

const DECISION_PAYLOAD: JsonPayloadKind = {
  what: 'governor decision',
  field: 'decision',
  maxBytes: MAX_DECISION_BYTES,
  invalid,
};

/**
 * Encodes a decision as UTF-8 JSON, after checking it.
 *
 * @throws SluiceError `invalid_argument` naming the field when the decision is malformed.
 */
export function encodeDecision(decision: GovernorDecision): Uint8Array {
  return encodeJsonPayload(parseDecision(decision));
}

/**
 * Decodes and validates a stored or published decision. Returns a fresh object holding only the
 * known fields: unknown fields from a newer writer are dropped, not trusted.
 *
 * @throws SluiceError `invalid_argument` naming the field when the bytes are not a valid decision.
 */
export function decodeDecision(data: Uint8Array): GovernorDecision {
  return parseDecision(parseJsonPayload(data, DECISION_PAYLOAD));
}

/**
 * Validates an already parsed value as a decision.
 *
 * @throws SluiceError `invalid_argument` naming the field when it is not a valid decision.
 */
export function parseDecision(value: unknown): GovernorDecision {
  const v = jsonObject(value, 'decision', DECISION_PAYLOAD);
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
    retry_after_ms: retryAfter(v.retry_after_ms),
    throttle: v.throttle === undefined ? [] : priorities(v.throttle, 'throttle'),
    degrade: v.degrade === undefined ? [] : priorities(v.degrade, 'degrade'),
    limits: limits(v.limits),
    breakers: breakers(v.breakers),
    signals: signals(v.signals),
  };
}

function retryAfter(value: unknown): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw invalid('retry_after_ms', 'must be a whole number of milliseconds ≥ 0');
  }
  return value;
}

/** A JSON object used as a map, with a bounded number of entries keyed by resource names. */
function resourceMap(value: unknown, field: string): [string, unknown][] {
  if (value === undefined) return [];
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(field, 'must be an object keyed by resource');
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ENTRIES) throw invalid(field, `has more than ${MAX_ENTRIES} entries`);
  for (const [resource] of entries) {
    if (resourceProblem(resource)) throw invalid(field, `names an invalid resource "${resource}"`);
  }
  return entries;
}

function limits(value: unknown): Record<string, number> {
  const result: Record<string, number> = {};
  for (const [resource, limit] of resourceMap(value, 'limits')) {
    if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0) {
      throw invalid('limits', `of ${resource} must be a whole number ≥ 0`);
    }
    result[resource] = limit;
  }
  return result;
}

function breakers(value: unknown): Record<string, BreakerView> {
  const result: Record<string, BreakerView> = {};
  for (const [resource, view] of resourceMap(value, 'breakers')) {
    if (view !== 'open' && view !== 'half_open') {
      throw invalid('breakers', `of ${resource} must be "open" or "half_open"`);
    }
    result[resource] = view;
  }
  return result;
}

function signals(value: unknown): SignalReading[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_ENTRIES) {
    throw invalid('signals', `must be an array of at most ${MAX_ENTRIES} readings`);
  }
  return value.map((reading: unknown) => {
    const r = (typeof reading === 'object' && reading !== null ? reading : {}) as Record<
      string,
      unknown
    >;
    const names = [r.signal, r.scope, r.level];
    if (
      !names.every((n) => typeof n === 'string' && n.length > 0 && n.length <= MAX_NAME_LENGTH) ||
      typeof r.value !== 'number' ||
      !Number.isFinite(r.value)
    ) {
      throw invalid('signals', 'readings need signal, scope and level names and a finite value');
    }
    return {
      signal: r.signal as string,
      scope: r.scope as string,
      value: r.value,
      level: r.level as string,
    };
  });
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

/**
 * The urgent-wait guard keeps P0's wait bounded under a flood of lower-priority work (ARCHITECTURE
 * invariant 6): while a resource's P0 steps take longer than a target from dispatch to start (the
 * part of their wait that the work ahead of them in the pipeline lengthens; see `UrgentWait`), it
 * caps the P1–P3 steps that resource may have in flight. P0 may still take every slot of the
 * limit, and the cap never falls below its floor ({@link DEFAULT_FLOOR} unless set), so by default
 * lower priorities keep moving beside any number of P0 steps; a floor of 0 holds them while P0
 * waits longer than the target (see {@link UrgentWaitGuardOptions.floor}).
 *
 * The urgent reserve keeps slots for P0, but a slot is not all a step needs: every step of a flood
 * also takes its turn in the scheduler's passes, the executor's group writes, Postgres and the
 * machine's CPU, and a P0 step queues behind them at each hop. On the benchmark's two cores a
 * backlog of P3 put P0's p50 wait at 65–86 ms against 7–24 idle, and capping the flood's slots
 * brought it down (a fixed cap of 16 and of 8 of 64: 61 and 43 ms) at the cost of the flood's
 * rate. The cap is adaptive, so the flood keeps what P0 can spare:
 *
 * - A reading (the scheduler reads every {@link READ_INTERVAL_MS} while P0 work is about) gives
 *   each resource's P0 waits since the last one; the guard takes their 90th percentile.
 * - Above the target, the cap becomes a share of the P1–P3 steps in flight: target ÷ wait, between
 *   a quarter and three quarters (at least the floor) — a multiplicative decrease scaled by
 *   how far the wait overshoots (as Envoy's adaptive concurrency scales by minRTT ÷ sample), so a
 *   flood is cut down in a few readings rather than many. At most once until the steps in flight
 *   have come down to the cap: a lower cap only takes effect as steps finish, and cutting again
 *   before then overshoots.
 * - At or below the target, the cap grows by an eighth (at least one step) while the P1–P3 steps
 *   in flight fill at least half of it: additive increase, bounded by the flood itself.
 * - When the resource has had no P0 start for `releaseAfterMs`, the cap is lifted.
 * - When P0 work appears in a resource that has no cap (its onset), the next reading — taken at
 *   once — cuts the P1–P3 steps in flight there to a quarter (at least the floor), the
 *   deepest cut a wait can make, without waiting for P0 starts to show the wait — even when the
 *   first P0 step already started within the target: the gateway's urgent claim publishes a P0
 *   create's step before the scheduler hears of it, so the first start is quick whatever follows
 *   (session 17, with the urgent claim: the priority benchmark's backlog p99 was 158–210 ms with
 *   that waiver, 130 without). Readings come every {@link READ_INTERVAL_MS}, and a cut takes
 *   effect only as the flood's steps in flight finish, so a guard that waited for proof
 *   left the first P0 steps of a flood 2–3× their steady wait for most of a second (session 14:
 *   the first 40 of 500 high-priority jobs of the priority benchmark held every sample above its
 *   p95). Halving instead still left the executors running most of the flood for three quarters
 *   of a second while two more readings cut it (session 15: the claim transaction took 25–146 ms
 *   then, against 12–16 once the cap had bitten). Readings within the target then raise the cap
 *   again by an eighth each.
 *
 * A pure state machine: time comes in as arguments; the scheduler reads Postgres and applies the
 * caps to its claims (`AdmissionSettings.lowerPriorityCaps`), which count the P1–P3 steps in flight
 * against them.
 */
import type { UrgentWaitReading } from '@sluice/db';

/** The lowest cap unless set: two P1–P3 steps in flight, so the guard never stops lower priorities. */
export const DEFAULT_FLOOR = 2;
/** How often the scheduler reads the waits while the guard watches. */
export const READ_INTERVAL_MS = 250;
/** The bounds of a cut: the cap becomes this share of the steps in flight, at least and at most. */
const DECREASE = { least: 0.25, most: 0.75 } as const;
/** The cut at P0's onset, before any wait is known: the deepest a wait can make. */
const ONSET_SHARE = DECREASE.least;
const INCREASE = 1 / 8;
const WAIT_QUANTILE = 0.9;

export interface UrgentWaitGuardOptions {
  /** The P0 wait (dispatched → started, ms) above which lower priorities are capped. */
  readonly targetMs: number;
  /**
   * The fewest P1–P3 steps in flight a cap allows (default {@link DEFAULT_FLOOR}). Two keep lower
   * priorities moving whatever P0 does, but two short steps in flight still move a flood at a high
   * rate, whose CPU P0's steps wait for; 0 holds lower priorities while P0 waits longer than the
   * target, and readings within it let them back a step at a time (docs/benchmarks, reading 23).
   */
  readonly floor?: number;
  /** No P0 start in a resource for this long lifts its cap (default 1 s). */
  readonly releaseAfterMs?: number;
  /** How long after P0 work was last seen the guard keeps reading (default 2 s). */
  readonly watchForMs?: number;
}

/** A cap of P1–P3 steps in flight set, changed or lifted (`cap` undefined) by a reading. */
export interface CapChange {
  readonly resource: string;
  readonly cap: number | undefined;
  /** The cap before (undefined: there was none). */
  readonly previous: number | undefined;
  /** The 90th percentile of the P0 waits that moved it (none when a quiet spell lifted it). */
  readonly waitMs?: number;
}

/** What a reading needs of {@link UrgentWaitReading}: the waits and the steps in flight. */
export type GuardReading = Pick<UrgentWaitReading, 'waits' | 'inFlight'>;

export class UrgentWaitGuard {
  readonly #targetMs: number;
  readonly #floor: number;
  readonly #releaseAfterMs: number;
  readonly #watchForMs: number;
  /** P1–P3 steps in flight allowed, by resource. */
  readonly #caps = new Map<string, number>();
  /** Resources whose last cut has not taken effect yet (more in flight than the cap). */
  readonly #draining = new Set<string>();
  readonly #lastUrgentStartMs = new Map<string, number>();
  /** Resources where P0 work appeared while they had no cap, for the next reading. */
  readonly #onsets = new Set<string>();
  /** When each resource's last onset reading found no flood to cut. */
  readonly #quietOnsetMs = new Map<string, number>();
  #lastUrgentClaimMs = Number.NEGATIVE_INFINITY;
  #capsView: Readonly<Record<string, number>> = {};

  constructor(options: UrgentWaitGuardOptions) {
    this.#targetMs = options.targetMs;
    this.#floor = options.floor ?? DEFAULT_FLOOR;
    if (!(Number.isSafeInteger(this.#floor) && this.#floor >= 0)) {
      throw new RangeError(`the guard's floor must be a whole number of steps, got ${this.#floor}`);
    }
    this.#releaseAfterMs = options.releaseAfterMs ?? 1_000;
    this.#watchForMs = options.watchForMs ?? 2_000;
  }

  /**
   * P0 work is about in `resource`: this replica admitted a P0 step, or a created task announced
   * one as ready (every replica hears that, so each applies the caps to its own claims). Its start
   * will tell how long it waited. Returns true when this is the resource's onset (no cap there
   * yet, none noted since the last reading): the next reading should come at once — unless an
   * onset reading found no flood there less than {@link READ_INTERVAL_MS} ago. P0 work on a quiet
   * resource is an onset at every step, and reading at once for each cost a statement per P0 step
   * (38–41 readings a second in the priority benchmark's idle phase at 49 P0 arrivals a second,
   * against 3–4 since); such an onset waits for the next regular reading, which still treats it as
   * one.
   */
  urgentWorkSeen(nowMs: number, resource: string): boolean {
    this.#lastUrgentClaimMs = nowMs;
    if (this.#caps.has(resource) || this.#onsets.has(resource)) return false;
    this.#onsets.add(resource);
    const quietAt = this.#quietOnsetMs.get(resource);
    return quietAt === undefined || nowMs - quietAt >= READ_INTERVAL_MS;
  }

  /** Whether to read the waits now: P0 work was seen lately, or a cap is in place. */
  watching(nowMs: number): boolean {
    return this.#caps.size > 0 || nowMs - this.#lastUrgentClaimMs < this.#watchForMs;
  }

  /**
   * The caps of P1–P3 steps in flight, by resource, as the claims take them (they count the P1–P3
   * steps in flight apart from P0's) and the scheduler announces them: the same object until a
   * reading changes them. (They once went to the claim as a count of every priority, with the P0
   * steps in flight at the last reading added, and each P0 step that finished between two readings
   * opened a slot to lower priorities: at 49 P0 arrivals a second, ~28 low steps a second got
   * through a hold, docs/benchmarks reading 23.)
   */
  caps(): Readonly<Record<string, number>> {
    return this.#capsView;
  }

  /** Moves the caps on by one reading; returns what changed. */
  assess(reading: GuardReading, nowMs: number): CapChange[] {
    const waitsByResource = new Map<string, number[]>();
    for (const { resource, waitMs } of reading.waits) {
      const waits = waitsByResource.get(resource) ?? [];
      waits.push(waitMs);
      waitsByResource.set(resource, waits);
    }
    const changes: CapChange[] = [];
    const resources = new Set([...waitsByResource.keys(), ...this.#caps.keys(), ...this.#onsets]);
    const onsets = new Set(this.#onsets);
    this.#onsets.clear();
    for (const resource of resources) {
      const { lower } = reading.inFlight[resource] ?? { urgent: 0, lower: 0 };
      const waits = waitsByResource.get(resource);
      const change =
        onsets.has(resource) && !this.#caps.has(resource)
          ? this.#onset(resource, lower, nowMs)
          : waits !== undefined
            ? this.#waited(resource, quantile(waits, WAIT_QUANTILE), lower, nowMs)
            : this.#quiet(resource, nowMs);
      if (change) changes.push(change);
    }
    if (changes.length > 0) this.#capsView = Object.fromEntries(this.#caps);
    return changes;
  }

  #waited(
    resource: string,
    waitMs: number,
    lowerInFlight: number,
    nowMs: number,
  ): CapChange | undefined {
    this.#lastUrgentStartMs.set(resource, nowMs);
    const cap = this.#caps.get(resource);
    if (cap !== undefined && this.#draining.has(resource) && lowerInFlight <= cap) {
      this.#draining.delete(resource);
    }
    let next: number;
    if (waitMs > this.#targetMs) {
      if (this.#draining.has(resource)) return undefined;
      const share = Math.min(DECREASE.most, Math.max(DECREASE.least, this.#targetMs / waitMs));
      const from = Math.min(cap ?? lowerInFlight, lowerInFlight);
      next = Math.max(this.#floor, Math.floor(from * share));
      if (lowerInFlight > next) this.#draining.add(resource);
    } else {
      if (cap === undefined) return undefined;
      // A cap the flood fills under half of gives no evidence that a higher one would keep P0
      // within its target (Netflix's AIMD grows only while half its limit is in use). Raised at
      // every reading regardless, a cap on a resource with steady P0 work and no flood grew by an
      // eighth four times a second without end: past 2^31 in about a minute, where the claim
      // failed reading it as a Postgres int, and past a safe integer, where its notice did.
      if (lowerInFlight * 2 < cap) return undefined;
      next = cap + Math.max(1, Math.floor(cap * INCREASE));
    }
    if (next === cap) return undefined;
    this.#caps.set(resource, next);
    return { resource, cap: next, previous: cap, waitMs };
  }

  /** P0 work appeared where nothing was capped: cut the flood (unless it is small already). */
  #onset(resource: string, lowerInFlight: number, nowMs: number): CapChange | undefined {
    const cap = Math.max(this.#floor, Math.floor(lowerInFlight * ONSET_SHARE));
    if (cap >= lowerInFlight) {
      this.#quietOnsetMs.set(resource, nowMs);
      return undefined;
    }
    this.#quietOnsetMs.delete(resource);
    this.#caps.set(resource, cap);
    this.#draining.add(resource);
    // Counts as a start for the release: the P0 work seen has yet to start.
    this.#lastUrgentStartMs.set(resource, nowMs);
    return { resource, cap, previous: undefined };
  }

  #quiet(resource: string, nowMs: number): CapChange | undefined {
    const last = this.#lastUrgentStartMs.get(resource) ?? Number.NEGATIVE_INFINITY;
    const previous = this.#caps.get(resource);
    if (previous === undefined || nowMs - last < this.#releaseAfterMs) return undefined;
    this.#caps.delete(resource);
    this.#draining.delete(resource);
    this.#lastUrgentStartMs.delete(resource);
    return { resource, cap: undefined, previous };
  }
}

/** The nearest-rank quantile of a non-empty list. */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/**
 * One leadership tenure of the governor: from winning the lease to losing it (or being deposed).
 *
 * It first takes a new leader epoch from Postgres, then decides every interval and publishes the
 * decision — fenced in KV (see `fenced-write.ts`), then announced on core NATS — until `stop()` is
 * called or a newer epoch shows up in KV. A decision that says nothing new (the one published
 * last, readings included, but for its time) is published again only once `refreshMs` has passed,
 * which keeps it fresh for the services (they ignore one older than `SLUICE_DECISION_STALE_MS`)
 * without a KV write, a KV read and an announcement every second of an idle system.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from '@sluice/telemetry';
import { sameDecision, type GovernorDecision } from '@sluice/bus';
import type { FencedWriteOutcome } from './fenced-write.js';

/** What a tenure needs; functions rather than clients, so each concern stays where it belongs. */
export interface TenureDeps {
  /** This process's lease holder id. */
  readonly holder: string;
  /** The lease revision that began this tenure, for logs. */
  readonly leaseRevision: number;
  /** Pause between two decisions, in milliseconds; also the retry pause after a failure. */
  readonly intervalMs: number;
  /**
   * Longest time between two publications of a decision that says nothing new (default
   * `intervalMs`: every decision is published).
   */
  readonly refreshMs?: number;
  /** The clock, for tests. */
  readonly now?: () => number;
  /** Takes the next leader epoch (Postgres). */
  advanceEpoch(): Promise<number>;
  /**
   * The decision to publish now; `undefined` when a write fenced by `epoch` (breaker states in
   * Postgres) was refused because a newer leader exists.
   */
  decide(epoch: number): Promise<GovernorDecision | undefined>;
  /** Writes the decision to KV unless a newer epoch is there. */
  write(decision: GovernorDecision): Promise<FencedWriteOutcome>;
  /** Announces a written decision to subscribers (core NATS; fire and forget). */
  announce(decision: GovernorDecision): void;
  /**
   * The tenure stopped acting for good (stopped, deposed or failed) and no decision of it is still
   * being made: e.g. to withdraw the leader's gauges, which a standby must not go on reporting.
   */
  onEnded?(): void;
  readonly log: Logger;
}

/** A running tenure. */
export interface Tenure {
  /** The epoch of this tenure once taken from Postgres, while it is acting; else `undefined`. */
  epoch(): number | undefined;
  /** Whether it is acting: it has its epoch, is not stopped and has not been deposed. */
  isActing(): boolean;
  /**
   * Stops acting at once (no publication starts after this call) and resolves when the one in
   * progress, if any, has settled, or after {@link STOP_GRACE_MS}. Idempotent.
   */
  stop(): Promise<void>;
}

/**
 * Longest wait of `stop()` for a publication in flight. The lease waits for `stop()` before it hands
 * the key over, so a hung Postgres or NATS call must not hold up the successor; a late write is
 * harmless (the successor's greater epoch fences it).
 */
export const STOP_GRACE_MS = 2_000;

/** Starts a tenure. Call when the lease is acquired; stop it when the lease is lost. */
export function startTenure(deps: TenureDeps): Tenure {
  const { log, intervalMs } = deps;
  const refreshMs = deps.refreshMs ?? intervalMs;
  const now = deps.now ?? Date.now;
  const abort = new AbortController();
  /** The decision this tenure last wrote, and when. */
  let lastWritten: { readonly decision: GovernorDecision; readonly at: number } | undefined;
  const { signal } = abort;
  let epoch: number | undefined;
  let deposed = false;

  /** Waits `ms`; false when the tenure was stopped meanwhile. */
  const pause = async (ms: number): Promise<boolean> => {
    try {
      await delay(ms, undefined, { signal });
      return true;
    } catch {
      return false;
    }
  };

  const takeEpoch = async (): Promise<number | undefined> => {
    while (!signal.aborted) {
      try {
        return await deps.advanceEpoch();
      } catch (err) {
        log.warn({ err }, 'governor could not take a leader epoch; retrying');
        if (!(await pause(intervalMs))) return undefined;
      }
    }
    return undefined;
  };

  /** Publishes once; returns false when the tenure must end (deposed). */
  const publish = async (ours: number): Promise<boolean> => {
    const decision = await deps.decide(ours);
    if (signal.aborted) return false;
    if (decision === undefined) {
      deposed = true;
      log.error({ epoch: ours }, 'governor deposed: Postgres holds a newer leader epoch');
      return false;
    }
    const decidedAt = now();
    if (
      lastWritten !== undefined &&
      decidedAt - lastWritten.at < refreshMs &&
      sameDecision(lastWritten.decision, decision, { readings: true })
    ) {
      return true;
    }
    const outcome = await deps.write(decision);
    // A stop that came while the write was in flight: the write may have landed, but nothing more
    // may be done in this tenure's name.
    if (signal.aborted) return false;
    switch (outcome.type) {
      case 'written':
        if (outcome.previous.type === 'invalid') {
          log.warn({ err: outcome.previous.error }, 'governor replaced an unreadable decision');
        } else if (
          outcome.previous.type === 'decision' &&
          outcome.previous.decision.epoch !== ours
        ) {
          log.info(
            { epoch: ours, previous_epoch: outcome.previous.decision.epoch },
            'governor took over the decisions',
          );
        }
        lastWritten = { decision, at: decidedAt };
        deps.announce(decision);
        return true;
      case 'deposed':
        deposed = true;
        log.error(
          { epoch: ours, newer_epoch: outcome.current.epoch, newer_holder: outcome.current.holder },
          'governor deposed: a newer leader epoch wrote the decisions; no longer acting',
        );
        return false;
      case 'conflict':
        log.debug({ epoch: ours }, 'governor decision write raced another writer; will re-read');
        return true;
    }
  };

  const run = async (): Promise<void> => {
    const ours = await takeEpoch();
    // An epoch taken after the lease was lost is skipped; a gap in epochs is harmless.
    if (ours === undefined || signal.aborted) return;
    epoch = ours;
    log.info(
      { epoch: ours, holder: deps.holder, lease_revision: deps.leaseRevision },
      'governor lease acquired',
    );
    do {
      try {
        if (!(await publish(ours))) return;
      } catch (err) {
        if (signal.aborted) return;
        log.warn({ err, epoch: ours }, 'governor could not publish its decision; retrying');
      }
    } while (await pause(intervalMs));
  };

  const running = run()
    .catch((err: unknown) => {
      log.error({ err }, 'governor tenure failed');
    })
    .finally(() => deps.onEnded?.());

  return {
    epoch: () => (signal.aborted || deposed ? undefined : epoch),
    isActing: () => !signal.aborted && !deposed && epoch !== undefined,
    async stop() {
      abort.abort();
      await Promise.race([running, delay(STOP_GRACE_MS, undefined, { ref: false })]);
    },
  };
}

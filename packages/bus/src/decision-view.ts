/**
 * The governor's live decision as one service sees it: read from the governor KV bucket at start,
 * then kept current from the `governorDecisions` subject (the governor publishes a decision that
 * says something new at once, an unchanged one again within a quarter of the stale age, so a
 * subscriber is current within about one governor interval and never sees a live one go stale).
 *
 * A document older than `staleAfterMs` (by its `decided_at`) means no governor is acting: the view
 * then answers {@link UNGOVERNED}, which admits everything, and says so in the log once. Failing
 * open is deliberate — a dead governor must not freeze the queue; the limits in Postgres and the
 * executors' own gates still hold — and it is visible (a warning and `isStale()`).
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Priority } from '@sluice/core';
import {
  DECISIONS_KEY,
  decodeDecision,
  NOTHING_DECIDED,
  sameDecision,
} from './governor-decision.js';
import type { GovernorDecision } from './governor-decision.js';
import { isMissingGovernorBucket, type GovernorBucketReader } from './governor-bucket.js';

/** What a view answers while no fresh decision exists. */
export const UNGOVERNED: GovernorDecision = {
  epoch: 1,
  holder: 'none',
  level: 'normal',
  holds: [],
  reject: [],
  decided_at: new Date(0).toISOString(),
  reasons: ['no live governor decision'],
  ...NOTHING_DECIDED,
};

/** Default age after which a decision is ignored. */
export const DEFAULT_DECISION_STALE_MS = 10_000;

export interface DecisionViewOptions {
  readonly nc: NatsConnection;
  /** The governor bucket, read once at start (optional: the subject alone also works). */
  readonly kv?: GovernorBucketReader;
  /** The `governorDecisions` subject. */
  readonly subject: string;
  readonly staleAfterMs?: number;
  /** Called when a newer decision arrives (not on every re-publication of the same one). */
  readonly onChange?: (decision: GovernorDecision) => void;
  readonly log: {
    warn(fields: Record<string, unknown>, message: string): void;
    info(fields: Record<string, unknown>, message: string): void;
  };
  /** The clock, for tests. */
  readonly now?: () => number;
}

/** A live view of the decision. */
export interface DecisionView {
  /** The decision in force now: the latest fresh one, or {@link UNGOVERNED}. */
  current(): GovernorDecision;
  /** Whether the latest decision is too old to be obeyed (or none was ever seen). */
  isStale(): boolean;
  stop(): void;
}

/** Starts a view. Resolves after the initial KV read (a failed read is logged, not thrown). */
export async function startDecisionView(options: DecisionViewOptions): Promise<DecisionView> {
  const staleAfterMs = options.staleAfterMs ?? DEFAULT_DECISION_STALE_MS;
  const now = options.now ?? Date.now;
  let latest: GovernorDecision | undefined;
  let reportedStale = false;

  const accept = (decision: GovernorDecision): void => {
    if (latest !== undefined) {
      if (decision.epoch < latest.epoch) return;
      if (decision.epoch === latest.epoch && decision.decided_at < latest.decided_at) return;
    }
    const changed = latest === undefined || !sameDecision(latest, decision, { readings: false });
    latest = decision;
    if (changed) options.onChange?.(decision);
  };

  if (options.kv) {
    try {
      const entry = await options.kv.get(DECISIONS_KEY);
      if (entry !== null && entry.operation === 'PUT') accept(decodeDecision(entry.value));
    } catch (error) {
      if (isMissingGovernorBucket(error)) {
        // The governor creates its bucket when it first leads: before that there is nothing to
        // read and nothing wrong (a stack's services start in any order).
        options.log.info(
          { subject: options.subject },
          'no governor has published a decision yet; waiting for one',
        );
      } else {
        options.log.warn({ err: error }, 'could not read the governor decision; waiting for one');
      }
    }
  }
  const subscription: Subscription = options.nc.subscribe(options.subject, {
    callback: (error, message) => {
      if (error) return options.log.warn({ err: error }, 'governor decision subscription failed');
      try {
        accept(decodeDecision(message.data));
      } catch (decodeError) {
        options.log.warn({ err: decodeError }, 'ignored a malformed governor decision');
      }
    },
  });

  const isStale = (): boolean =>
    latest === undefined || now() - Date.parse(latest.decided_at) > staleAfterMs;

  return {
    current() {
      if (!isStale()) {
        if (reportedStale) {
          reportedStale = false;
          options.log.info({ epoch: latest?.epoch }, 'governor decisions are live again');
        }
        return latest as GovernorDecision;
      }
      if (!reportedStale && latest !== undefined) {
        reportedStale = true;
        options.log.warn(
          { decided_at: latest.decided_at, stale_after_ms: staleAfterMs },
          'the governor decision is stale; admitting as if ungoverned until a fresh one arrives',
        );
      }
      return UNGOVERNED;
    },
    isStale,
    stop: () => subscription.unsubscribe(),
  };
}

/** Whether `priority` is among the priorities a decision lists. */
export function listsPriority(
  priorities: readonly Priority[] | undefined,
  priority: Priority,
): boolean {
  return priorities?.includes(priority) ?? false;
}

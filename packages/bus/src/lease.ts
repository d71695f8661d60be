/**
 * A leader lease in a KV bucket, built for nats-server 2.9 (NATS-NOTES.md §7).
 *
 * On 2.9 the only expiry is the bucket's TTL (the stream's `max_age`): per-key TTLs are ignored and
 * an expired key vanishes without a watch event. So:
 *
 * - a candidate takes the lease with `create` (succeeds only when the key is absent or deleted);
 * - the leader renews every `ttl/3` with a compare-and-set `update`, which also resets the key's age;
 * - followers retry `create` every `ttl/2`, and at once when they see the key deleted;
 * - a leader that has not renewed for `2·ttl/3` (measured from when it *sent* its last successful
 *   write, which the server stored no earlier) steps down before the key can expire and let anyone
 *   else in: the remaining third is the margin for timer delays;
 * - `stop()` ends leader work first, then deletes the key, so a successor takes over at once.
 *
 * Fencing: the revision given to `onAcquired` grows with every new tenure (it is a sequence of the
 * bucket's stream); pass it along with side effects so stale leaders can be refused.
 */
import { JetStreamApiError } from '@nats-io/jetstream';
import { KvWatchInclude } from '@nats-io/kv';
import type { KV, KvEntry, KvWatchEntry } from '@nats-io/kv';
import type { QueuedIterator } from '@nats-io/transport-node';
import { SluiceError } from '@sluice/core';

/** Why leadership ended. */
export type LeaseLostReason =
  /** The key was taken over or changed by someone else (a compare-and-set failed). */
  | 'superseded'
  /** No renewal succeeded within two thirds of the TTL (NATS unreachable or too slow). */
  | 'expired'
  /** `stop()` was called. */
  | 'stopped';

/** Options of {@link createLease}. */
export interface LeaseOptions {
  /** The leases bucket, whose TTL must equal `ttlMs` (see `openKvBuckets`). */
  readonly kv: KV;
  /** The lease's key, e.g. `governor` or `relay`. */
  readonly key: string;
  /**
   * Who is asking; unique per process incarnation (e.g. `governor-<host>-<pid>-<random>`). A lease
   * finding its own holder id in the key treats the entry as its own.
   */
  readonly holderId: string;
  /** Lease time-to-live in milliseconds; equal to the bucket's TTL. */
  readonly ttlMs: number;
  /** Leadership began; `revision` is the fencing token of this tenure. */
  onAcquired(revision: number): void;
  /**
   * Leadership ended: stop leader work now. Called before the key could expire, and on `stop()`
   * before the key is deleted (then awaited).
   */
  onLost(reason: LeaseLostReason): void | Promise<void>;
  /** Errors that do not end the lease by themselves (NATS hiccups), for logging. */
  onError?(error: unknown): void;
}

/** A running lease. */
export interface Lease {
  /**
   * Starts competing for the lease. Resolves after the first attempt, so `isLeader()` then tells
   * whether this process won it right away.
   *
   * @throws SluiceError `failed_precondition` when the bucket's TTL differs from `ttlMs`.
   */
  start(): Promise<void>;
  /** Stops competing; as leader, calls `onLost('stopped')`, then deletes the key. Idempotent. */
  stop(): Promise<void>;
  /** Whether this process leads now (false as soon as its renewal deadline has passed). */
  isLeader(): boolean;
  /** The fencing token of the current tenure, or `undefined` when not leading. */
  revision(): number | undefined;
}

/** The JSON value stored under the lease key. */
interface LeaseValue {
  readonly holder: string;
  readonly acquired_at: string;
}

const WRONG_LAST_SEQUENCE = 10071;
const WRONG_LAST_SEQUENCE_UNKNOWN = 10164;

function isCasFailure(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === WRONG_LAST_SEQUENCE || err.code === WRONG_LAST_SEQUENCE_UNKNOWN)
  );
}

const encoder = new TextEncoder();

function holderOf(entry: KvEntry | null): string | undefined {
  if (entry === null || entry.operation !== 'PUT') return undefined;
  try {
    const value = entry.json<Partial<LeaseValue>>();
    return typeof value.holder === 'string' ? value.holder : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Creates a leader lease. Nothing happens until `start()`.
 *
 * @throws SluiceError `invalid_argument` for an empty key or holder id, or a TTL under 300 ms.
 */
export function createLease(options: LeaseOptions): Lease {
  const { kv, key, holderId, ttlMs } = options;
  if (key.length === 0 || holderId.length === 0) {
    throw new SluiceError('invalid_argument', 'lease key and holderId are required');
  }
  if (!Number.isFinite(ttlMs) || ttlMs < 300) {
    throw new SluiceError('invalid_argument', `lease ttlMs must be ≥ 300, got ${ttlMs}`, {
      field: 'ttlMs',
    });
  }
  const renewEveryMs = Math.floor(ttlMs / 3);
  const retryEveryMs = Math.floor(ttlMs / 2);
  const validForMs = Math.floor((ttlMs * 2) / 3);
  // A renewal gets a sixth of the TTL to be answered, so a leader has two tries (and, on a timely
  // first failure, more) between its scheduled renewal at ttl/3 and its deadline at 2·ttl/3.
  const renewTimeoutMs = Math.max(100, Math.floor(ttlMs / 6));
  /** Pause before retrying a failed renewal (errors such as a closed connection come instantly). */
  const renewRetryMs = Math.max(20, Math.floor(ttlMs / 30));
  const now = (): number => performance.now();

  let started = false;
  let stopped = false;
  /** Revision of our last successful write of the key; may be stale after a step-down. */
  let ownRevision: number | undefined;
  /** The value we write (kept across renewals: `acquired_at` is when this tenure began). */
  let value: Uint8Array | undefined;
  /** When (monotonic ms) our last successful write was sent. */
  let lastSentAt = 0;
  /** Until when (monotonic ms) we may act as leader. */
  let validUntil = 0;
  /** Fencing token while leading; `undefined` otherwise. */
  let tenure: number | undefined;
  let tickTimer: NodeJS.Timeout | undefined;
  let deadlineTimer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let watcher: QueuedIterator<KvWatchEntry> | undefined;

  const report = (err: unknown): void => {
    try {
      options.onError?.(err);
    } catch {
      // A failing error reporter must not break the lease.
    }
  };

  const lose = (reason: LeaseLostReason): Promise<void> => {
    if (tenure === undefined) return Promise.resolve();
    tenure = undefined;
    clearTimeout(deadlineTimer);
    try {
      return Promise.resolve(options.onLost(reason)).catch(report);
    } catch (err) {
      report(err);
      return Promise.resolve();
    }
  };

  /** Steps down when `validUntil` passes without a renewal moving it. */
  const armDeadline = (): void => {
    clearTimeout(deadlineTimer);
    // Timers may fire a little early against performance.now(): re-arm until really past.
    deadlineTimer = setTimeout(
      () => (now() >= validUntil ? void lose('expired') : armDeadline()),
      Math.max(1, Math.ceil(validUntil - now())),
    );
  };

  /** Records a successful write sent at `sentAt`, and starts a tenure if we were not leading. */
  const held = (revision: number, sentAt: number): void => {
    ownRevision = revision;
    lastSentAt = sentAt;
    validUntil = sentAt + validForMs;
    if (validUntil <= now()) return; // the answer came too late to act on; the next renewal decides
    armDeadline();
    if (tenure === undefined && !stopped) {
      tenure = revision;
      try {
        options.onAcquired(revision);
      } catch (err) {
        report(err);
      }
    }
  };

  const renew = async (revision: number, payload: Uint8Array, mayAdopt = true): Promise<void> => {
    const sentAt = now();
    try {
      held(await kv.update(key, payload, revision, renewTimeoutMs), sentAt);
    } catch (err) {
      if (!isCasFailure(err)) {
        report(err); // no answer: keep trying until the deadline timer steps us down
        return;
      }
      ownRevision = undefined;
      if (!(mayAdopt && (await adoptOwnEntry()))) await lose('superseded');
    }
  };

  /**
   * The key holds something other than what we last wrote. If the entry is ours after all (a write
   * whose answer was lost, e.g. a timed-out create or renewal that the server did store), take it
   * up again with a renewal; returns whether it was ours.
   */
  const adoptOwnEntry = async (): Promise<boolean> => {
    const entry = await kv.get(key);
    if (entry === null || holderOf(entry) !== holderId) return false;
    value = entry.value;
    await renew(entry.revision, entry.value, false);
    return true;
  };

  const acquire = async (): Promise<void> => {
    const payload = encoder.encode(
      JSON.stringify({
        holder: holderId,
        acquired_at: new Date().toISOString(),
      } satisfies LeaseValue),
    );
    const sentAt = now();
    try {
      const revision = await kv.create(key, payload);
      value = payload;
      held(revision, sentAt);
    } catch (err) {
      if (!isCasFailure(err)) {
        report(err);
        return;
      }
      // Someone holds it, unless it is our own entry from a create whose answer was lost.
      await adoptOwnEntry();
    }
  };

  const attempt = async (): Promise<void> => {
    if (ownRevision !== undefined && value !== undefined) await renew(ownRevision, value);
    else await acquire();
  };

  /** Holders renew ttl/3 after their last successful write, and retry quickly when that fails. */
  const nextDelay = (): number => {
    if (ownRevision === undefined) return retryEveryMs;
    const due = lastSentAt + renewEveryMs - now();
    if (due > 0) return due;
    // Overdue: retry quickly while the key may still be ours; once the TTL has run out it is gone
    // anyway, so fall back to a follower's pace (the next attempt finds that out).
    return now() < lastSentAt + ttlMs ? renewRetryMs : retryEveryMs;
  };

  const schedule = (delayMs: number): void => {
    clearTimeout(tickTimer);
    if (stopped) return;
    tickTimer = setTimeout(() => void tick(), delayMs);
  };

  /** Runs one attempt (never two at once) and schedules the next. */
  const tick = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await attempt();
        } catch (err) {
          report(err);
        }
      } while (again && !stopped);
    })().finally(() => {
      running = undefined;
      schedule(nextDelay());
    });
    return running;
  };

  /** Followers react to a deleted key at once instead of at their next retry. */
  const watch = async (): Promise<void> => {
    try {
      watcher = await kv.watch({ key, include: KvWatchInclude.UpdatesOnly });
    } catch (err) {
      report(err); // the retry timer alone still works, only slower
      return;
    }
    if (stopped) {
      watcher.stop();
      return;
    }
    for await (const entry of watcher) {
      if (stopped) break;
      if (entry.operation !== 'PUT' && ownRevision === undefined) void tick();
    }
  };

  return {
    async start() {
      if (started) return;
      started = true;
      const status = await kv.status();
      if (status.ttl !== ttlMs) {
        started = false;
        throw new SluiceError(
          'failed_precondition',
          `lease bucket ${status.bucket} has a TTL of ${status.ttl} ms, the lease needs ${ttlMs} ms`,
        );
      }
      void watch().catch(report);
      await tick();
    },

    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(tickTimer);
      watcher?.stop();
      await running;
      await lose('stopped');
      clearTimeout(deadlineTimer);
      if (ownRevision !== undefined) {
        try {
          // Only our own revision: never delete a successor's lease.
          await kv.delete(key, { previousSeq: ownRevision });
        } catch (err) {
          if (!isCasFailure(err)) report(err);
        }
        ownRevision = undefined;
      }
    },

    isLeader() {
      return tenure !== undefined && !stopped && now() < validUntil;
    },

    revision() {
      return tenure !== undefined && now() < validUntil ? tenure : undefined;
    },
  };
}

/**
 * One subscription to every task event notice, shared by all `WatchTask` calls of this gateway
 * (never one consumer per watch). A notice only wakes the watchers of its task; they read the
 * events themselves from Postgres, the record.
 *
 * The subscription exists only while someone watches (and a linger after the last watch ends, so a
 * gateway with watches coming and going keeps one subscription): every task has about four events,
 * and a gateway that received and decoded each of them for no watcher spent CPU on every task it
 * did not serve. Notices of tasks nobody here watches are dropped by subject, before decoding.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { decodeMessageOf, type BusCatalog } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';

/** Woken with the sequence number of a new event of the task. */
export type EventListener = (seq: number) => void;

/** The shared subscription. */
export interface EventHub {
  /**
   * Listens for the task's events until the returned function is called. Resolves once the NATS
   * server has the subscription, so that every event published afterwards is noticed; if NATS
   * cannot confirm it, or not within {@link LISTEN_CONFIRM_MS}, resolves anyway (watchers
   * re-check on a timer too).
   */
  listen(taskId: string, listener: EventListener): Promise<() => void>;
  close(): void;
}

/** How long the subscription outlives the last watch, by default. */
export const DEFAULT_EVENT_HUB_LINGER_MS = 30_000;

/**
 * Longest a watch waits for the NATS server to confirm the subscription. A server that does not
 * answer (frozen, or cut off while its connection looks open) is noticed by nats.js only after
 * its pings go unanswered, minutes later, and until then the watch would not even replay the
 * task's history from Postgres.
 */
export const LISTEN_CONFIRM_MS = 1_000;

/**
 * When the hub subscribes again after the server ended its subscription, the first time; each
 * further ending in a row doubles the wait, up to {@link RESUBSCRIBE_MAX_MS}. A new watch
 * subscribes at once.
 */
export const RESUBSCRIBE_FIRST_MS = 500;
export const RESUBSCRIBE_MAX_MS = 30_000;

export function startEventHub(
  nc: NatsConnection,
  catalog: BusCatalog,
  log: Logger,
  lingerMs = DEFAULT_EVENT_HUB_LINGER_MS,
): EventHub {
  const listeners = new Map<string, Set<EventListener>>();
  let subscription: Subscription | undefined;
  /** Settles once the server has processed the subscription (a flush after the SUB). */
  let live: Promise<void> = Promise.resolve();
  let lingering: ReturnType<typeof setTimeout> | undefined;
  /** The next attempt to subscribe again after the server ended the subscription. */
  let retrying: ReturnType<typeof setTimeout> | undefined;
  /** Subscriptions the server ended since the last one it kept, for the retry's backoff. */
  let failures = 0;

  const deliver = (subject: string, data: Uint8Array) => {
    // The subject ends with the task id (`<prefix>.events.<tenant>.<task>`).
    const watchers = listeners.get(subject.slice(subject.lastIndexOf('.') + 1));
    if (!watchers) return;
    let notice;
    try {
      notice = decodeMessageOf('task.event', subject, data);
    } catch (decodeError) {
      log.warn({ err: decodeError, subject }, 'ignored a malformed event');
      return;
    }
    for (const listener of watchers) listener(notice.seq);
  };

  const subscribe = () => {
    if (lingering !== undefined) {
      clearTimeout(lingering);
      lingering = undefined;
    }
    if (retrying !== undefined) {
      clearTimeout(retrying);
      retrying = undefined;
    }
    if (subscription) return;
    const sub = nc.subscribe(catalog.subjects.eventsAll, {
      callback: (error, message) => {
        if (error) return log.warn({ err: error }, 'event subscription failed');
        deliver(message.subject, message.data);
      },
    });
    subscription = sub;
    // The server may end the subscription (a permission it no longer grants, after a reload of its
    // configuration); nats.js then closes it for good. Kept, it would look live while no notice
    // came, and every watch — this one and all later — would wait for its re-check on each event.
    void sub.closed.then((error) => {
      if (subscription !== sub) return; // Unsubscribed here, or replaced already.
      subscription = undefined;
      if (listeners.size === 0 || nc.isClosed() || nc.isDraining()) return;
      const delayMs = Math.min(RESUBSCRIBE_MAX_MS, RESUBSCRIBE_FIRST_MS * 2 ** failures);
      failures += 1;
      log.warn({ err: error, retry_in_ms: delayMs }, 'event subscription ended; subscribing again');
      retrying = setTimeout(() => {
        retrying = undefined;
        if (listeners.size === 0 || nc.isClosed() || nc.isDraining()) return;
        try {
          subscribe();
        } catch (subscribeError) {
          // Thrown here, it would end the gateway; its watches re-check meanwhile.
          log.warn({ err: subscribeError }, 'could not subscribe to the event notices again');
        }
      }, delayMs);
      retrying.unref();
    });
    live = nc.flush().then(
      () => {
        // The server answers a refused SUB before this flush's PONG.
        if (!sub.isClosed()) failures = 0;
      },
      (error: unknown) => {
        log.warn({ err: error }, 'could not confirm the event subscription; watchers re-check');
      },
    );
  };

  const unsubscribeLater = () => {
    if (lingering !== undefined || !subscription) return;
    lingering = setTimeout(() => {
      lingering = undefined;
      if (listeners.size > 0) return;
      subscription?.unsubscribe();
      subscription = undefined;
    }, lingerMs);
    lingering.unref();
  };

  return {
    async listen(taskId, listener) {
      subscribe();
      let set = listeners.get(taskId);
      if (!set) listeners.set(taskId, (set = new Set()));
      set.add(listener);
      await confirmedOrLate(live);
      return () => {
        set.delete(listener);
        if (set.size === 0 && listeners.get(taskId) === set) listeners.delete(taskId);
        if (listeners.size === 0) unsubscribeLater();
      };
    },
    close() {
      if (lingering !== undefined) clearTimeout(lingering);
      lingering = undefined;
      if (retrying !== undefined) clearTimeout(retrying);
      retrying = undefined;
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}

/** Settles when `confirmation` does (it never rejects), or after {@link LISTEN_CONFIRM_MS}. */
function confirmedOrLate(confirmation: Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const late = setTimeout(resolve, LISTEN_CONFIRM_MS);
    void confirmation.then(() => {
      clearTimeout(late);
      resolve();
    });
  });
}

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
   * cannot confirm it, resolves anyway (watchers re-check on a timer too).
   */
  listen(taskId: string, listener: EventListener): Promise<() => void>;
  close(): void;
}

/** How long the subscription outlives the last watch, by default. */
export const DEFAULT_EVENT_HUB_LINGER_MS = 30_000;

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
    if (subscription) return;
    subscription = nc.subscribe(catalog.subjects.eventsAll, {
      callback: (error, message) => {
        if (error) return log.warn({ err: error }, 'event subscription failed');
        deliver(message.subject, message.data);
      },
    });
    live = nc.flush().catch((error: unknown) => {
      log.warn({ err: error }, 'could not confirm the event subscription; watchers re-check');
    });
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
      await live;
      return () => {
        set.delete(listener);
        if (set.size === 0 && listeners.get(taskId) === set) listeners.delete(taskId);
        if (listeners.size === 0) unsubscribeLater();
      };
    },
    close() {
      if (lingering !== undefined) clearTimeout(lingering);
      lingering = undefined;
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}

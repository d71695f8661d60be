/**
 * One subscription to every task event notice, shared by all `WatchTask` calls of this gateway
 * (never one consumer per watch). A notice only wakes the watchers of its task; they read the
 * events themselves from Postgres, the record.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { decodeMessageOf, type BusCatalog } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';

/** Woken with the sequence number of a new event of the task. */
export type EventListener = (seq: number) => void;

/** The shared subscription. */
export interface EventHub {
  /** Listens for the task's events until the returned function is called. */
  listen(taskId: string, listener: EventListener): () => void;
  close(): void;
}

export function startEventHub(nc: NatsConnection, catalog: BusCatalog, log: Logger): EventHub {
  const listeners = new Map<string, Set<EventListener>>();
  const subscription: Subscription = nc.subscribe(catalog.subjects.eventsAll, {
    callback: (error, message) => {
      if (error) return log.warn({ err: error }, 'event subscription failed');
      let notice;
      try {
        notice = decodeMessageOf('task.event', message.subject, message.data);
      } catch (decodeError) {
        return log.warn(
          { err: decodeError, subject: message.subject },
          'ignored a malformed event',
        );
      }
      for (const listener of listeners.get(notice.task_id) ?? []) listener(notice.seq);
    },
  });
  return {
    listen(taskId, listener) {
      let set = listeners.get(taskId);
      if (!set) listeners.set(taskId, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(taskId);
      };
    },
    close: () => subscription.unsubscribe(),
  };
}

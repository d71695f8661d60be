/**
 * Pulls dispatched steps of one resource from its four priority consumers and hands them to a
 * handler only when a local slot is free, most urgent first.
 *
 * Each priority has its own durable consumer (JetStream work queues cannot reorder). One `consume()`
 * per priority keeps at most one message buffered in the client and one here; whenever a slot
 * frees, the highest priority that has a message wins. P1–P3 start only while more slots than the
 * urgent reserve are free (`Slots`), so a P0 arriving under a flood of long steps starts at once.
 * Messages that wait here for a slot are kept alive with `working()` so they do not age past the
 * ack wait and get redelivered.
 */
import type {
  ConsumerMessages,
  ConsumerNotification,
  JetStreamClient,
  JsMsg,
} from '@nats-io/jetstream';
import { PRIORITIES, Priority } from '@sluice/core';
import { DEFAULT_PULL_EXPIRES_MS, type BusCatalog } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';
import type { Slots } from './slots.js';

/** Options of {@link startPriorityPuller}. */
export interface PriorityPullerOptions {
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  readonly resource: string;
  readonly slots: Slots;
  readonly ackWaitMs: number;
  readonly log: Logger;
  /** Runs one message; the slot is released when it settles. Must not throw. */
  readonly handle: (message: JsMsg, priority: Priority) => Promise<void>;
  /**
   * A priority's consumer (or the whole stream) no longer exists, e.g. after the nats-server lost
   * its store. `consume()` keeps asking whether it is back (every pull expiry) and resumes once it
   * is, but never recreates it: the owner must.
   */
  readonly onConsumerMissing?: (priority: Priority, notice: ConsumerNotification['type']) => void;
}

/** Notifications of `consume()` that mean the consumer is gone rather than merely slow. */
const CONSUMER_MISSING = new Set<ConsumerNotification['type']>([
  'consumer_not_found',
  'consumer_deleted',
  'stream_not_found',
  'no_responders',
]);

/** A running puller. */
export interface PriorityPuller {
  /** Stops pulling; buffered messages are handed back (nak) and running ones finish. */
  stop(): Promise<void>;
}

export async function startPriorityPuller(options: PriorityPullerOptions): Promise<PriorityPuller> {
  const { js, catalog, resource, slots, log } = options;
  const buffers = new Map<Priority, JsMsg>();
  let stopped = false;
  let notify: (() => void) | undefined;
  const signal = () => {
    const resolve = notify;
    notify = undefined;
    resolve?.();
  };
  const changed = () => new Promise<void>((resolve) => (notify = resolve));
  const drained = new Map<Priority, () => void>();

  // Subscribe to every priority before returning, so a missing consumer fails the start.
  const subscriptions: Array<[Priority, ConsumerMessages]> = await Promise.all(
    PRIORITIES.map(async (priority): Promise<[Priority, ConsumerMessages]> => {
      const name = catalog.consumers.step(resource, priority);
      const consumer = await js.consumers.get(catalog.streams.steps, name);
      return [
        priority,
        await consumer.consume({ max_messages: 1, expires: DEFAULT_PULL_EXPIRES_MS }),
      ];
    }),
  );
  for (const [priority, messages] of subscriptions) {
    void (async () => {
      for await (const notice of messages.status()) {
        if (CONSUMER_MISSING.has(notice.type)) options.onConsumerMissing?.(priority, notice.type);
      }
    })().catch((error: unknown) => log.warn({ err: error }, 'consumer status watch ended'));
  }
  const pumps = subscriptions.map(async ([priority, messages]) => {
    for await (const message of messages) {
      if (stopped) {
        message.nak();
        break;
      }
      buffers.set(priority, message);
      signal();
      // Take no more from this priority until the dispatcher has taken this one.
      await new Promise<void>((resolve) => drained.set(priority, resolve));
    }
  });

  // Keep buffered messages alive while they wait for a slot.
  const keepAlive = setInterval(
    () => {
      for (const message of buffers.values()) message.working();
    },
    Math.max(200, Math.floor(options.ackWaitMs / 3)),
  );

  const running = new Set<Promise<void>>();
  const dispatcher = (async () => {
    while (!stopped) {
      let picked: [Priority, JsMsg] | undefined;
      while (!stopped && !(picked = next(buffers, slots))) await changed();
      if (!picked) break;
      const [priority, message] = picked;
      slots.tryTake(priority === Priority.P0);
      buffers.delete(priority);
      drained.get(priority)?.();
      drained.delete(priority);
      const run = options
        .handle(message, priority)
        .catch((error: unknown) => log.error({ err: error }, 'step handler crashed'))
        .finally(() => {
          slots.release();
          running.delete(run);
          signal();
        });
      running.add(run);
    }
  })();

  return {
    async stop() {
      stopped = true;
      signal();
      clearInterval(keepAlive);
      // Hand back what waits for a slot and let the pumps go on before closing: closing waits for
      // a pump that is still blocked on its buffered message, which would never move again.
      for (const [, message] of buffers) message.nak();
      buffers.clear();
      for (const resolve of drained.values()) resolve();
      for (const [, subscription] of subscriptions) await subscription.close();
      await dispatcher;
      await Promise.allSettled(pumps);
      await Promise.allSettled([...running]);
    },
  };
}

/** The most urgent buffered message that may take a slot now, if any. */
function next(buffers: Map<Priority, JsMsg>, slots: Slots): [Priority, JsMsg] | undefined {
  for (const priority of PRIORITIES) {
    const message = buffers.get(priority);
    if (message && slots.canTake(priority === Priority.P0)) return [priority, message];
  }
  return undefined;
}

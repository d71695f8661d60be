/**
 * Pulls dispatched steps of one resource from its four priority consumers and hands them to a
 * handler only when a local slot is free, most urgent first.
 *
 * Each priority has its own durable consumer (JetStream work queues cannot reorder). One `consume()`
 * per priority asks for up to `pullBatch` messages per pull request, and its messages wait here in
 * arrival order until a slot frees; whenever one does, the highest priority that has a message
 * wins. P1–P3 start only while more slots than the urgent reserve are free (`Slots`), so a P0
 * arriving under a flood of long steps starts at once. Messages that wait here for a slot are kept
 * alive with `working()` so they do not age past the ack wait and get redelivered.
 *
 * Why a batch: a pull request per message was most of the executor's NATS traffic (one more write
 * and one more request for nats-server to serve per step). What a batch costs: a priority holds at
 * most `pullBatch` messages here and, while those wait, at most `pullBatch` more delivered into the
 * client, which `working()` cannot reach (a pump takes no more while its priority's queue is full);
 * those are redelivered after the ack wait if no slot frees by then, and a redelivery of a step
 * that has started meanwhile is refused as stale. Another executor of the resource could have run
 * what waits here, so the batch is kept below the slots (see `defaultPullBatch`). On stop, all of
 * it, here and in the client, is handed back (nak) for another executor, delivered again once this
 * process's pull requests have expired (see `handBack`); what is on its way as the pulls close
 * waits out the ack wait.
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
  /** Messages one pull request of a priority asks for; also how many of it may wait here (≥ 1). */
  readonly pullBatch: number;
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

/**
 * The pull batch of an executor with `slots` slots unless configured: half of them, so that a
 * drain's pulls carry several messages each while what may wait here stays below what the
 * executor runs at once.
 */
export function defaultPullBatch(slots: number): number {
  return Math.max(1, Math.ceil(slots / 2));
}

export async function startPriorityPuller(options: PriorityPullerOptions): Promise<PriorityPuller> {
  const { js, catalog, resource, slots, log, pullBatch } = options;
  if (!(Number.isInteger(pullBatch) && pullBatch >= 1)) {
    throw new RangeError(`the pull batch (${pullBatch}) must be a whole number of at least 1`);
  }
  // Each priority's messages that wait for a slot, oldest first.
  const waiting = new Map<Priority, JsMsg[]>(PRIORITIES.map((priority) => [priority, []]));
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
        await consumer.consume({
          max_messages: pullBatch,
          // Ask again once three quarters of a request have come, so that one stays open for what
          // arrives next and each asks for several (nats.js reads 0 as "unset", hence at least 1).
          threshold_messages: Math.max(1, Math.floor(pullBatch / 4)),
          expires: DEFAULT_PULL_EXPIRES_MS,
        }),
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
    const queue = waiting.get(priority)!;
    for await (const message of messages) {
      if (stopped) {
        handBack(message);
        continue;
      }
      queue.push(message);
      signal();
      // Take no more from this priority while a batch of it waits here for slots.
      while (!stopped && queue.length >= pullBatch) {
        await new Promise<void>((resolve) => drained.set(priority, resolve));
      }
    }
  });

  // Keep buffered messages alive while they wait for a slot.
  const keepAlive = setInterval(
    () => {
      for (const queue of waiting.values()) for (const message of queue) message.working();
    },
    Math.max(200, Math.floor(options.ackWaitMs / 3)),
  );

  const running = new Set<Promise<void>>();
  const dispatcher = (async () => {
    while (!stopped) {
      let picked: [Priority, JsMsg] | undefined;
      while (!stopped && !(picked = next(waiting, slots))) await changed();
      if (!picked) break;
      const [priority, message] = picked;
      slots.tryTake(priority === Priority.P0);
      waiting.get(priority)!.shift();
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
      // Stop taking deliveries first: a message handed back while a pull request of this process
      // is still open would be delivered straight back to it.
      const closing = subscriptions.map(([, subscription]) => subscription.close());
      // Then hand back what waits for a slot, and let the pumps hand back what the client holds
      // (closing waits for them to get through it).
      for (const queue of waiting.values()) {
        for (const message of queue) handBack(message);
        queue.length = 0;
      }
      for (const resolve of drained.values()) resolve();
      await Promise.all(closing);
      await dispatcher;
      await Promise.allSettled(pumps);
      await Promise.allSettled([...running]);
    },
  };
}

/**
 * How long a message handed back on stop waits before it is delivered again: past the expiry of
 * this process's last pull requests. nats-server 2.9 keeps an open pull request after its client
 * unsubscribed and would deliver the message straight into it, where nothing reads it any more
 * and it would wait out the ack wait instead (seen in the puller's tests).
 */
const HAND_BACK_DELAY_MS = DEFAULT_PULL_EXPIRES_MS + 1_000;

/** Hands a message this process will not run back to the consumer, for another executor. */
function handBack(message: JsMsg): void {
  message.nak(HAND_BACK_DELAY_MS);
}

/** The oldest waiting message of the most urgent priority that may take a slot now, if any. */
function next(waiting: Map<Priority, JsMsg[]>, slots: Slots): [Priority, JsMsg] | undefined {
  for (const priority of PRIORITIES) {
    const message = waiting.get(priority)![0];
    if (message && slots.canTake(priority === Priority.P0)) return [priority, message];
  }
  return undefined;
}

/**
 * Pulls dispatched steps of one resource from its four priority consumers and hands them to a
 * handler only when a local slot is free, most urgent first.
 *
 * Each priority has its own durable consumer (JetStream work queues cannot reorder). Each priority
 * waits here for a slot, in arrival order, at most `pullBatch` messages; whenever a slot frees, the
 * highest priority that has a message wins. P1–P3 start only while more slots than the urgent
 * reserve are free (`Slots`), so a P0 arriving under a flood of long steps starts at once.
 *
 * A priority asks for no more than its queue has room for (one `fetch()` of that many, once at
 * least half a batch is free), and reads every message of it into the queue as it comes, where
 * `working()` keeps it alive: nothing delivered waits unread in the client. With `consume()`, a
 * pull sent while the queue still had room went on delivering after it filled, and those
 * messages, out of `working()`'s reach, aged past the ack wait behind long steps and were
 * delivered again (to this executor too, which then held two copies and started both).
 *
 * Why a batch: a pull request per message was most of the executor's NATS traffic (one more write
 * and one more request for nats-server to serve per step). Another executor of the resource could
 * have run what waits here, so the batch is kept below the slots (see `defaultPullBatch`). On
 * stop, all of it is handed back (nak) for another executor, delivered again once this process's
 * pull requests have expired (see `handBack`); what is on its way as the pulls close waits out the
 * ack wait.
 */
import type {
  Consumer,
  ConsumerMessages,
  ConsumerNotification,
  JetStreamClient,
  JsMsg,
} from '@nats-io/jetstream';
import { PRIORITIES, Priority } from '@sluice/core';
import {
  DEFAULT_PULL_EXPIRES_MS,
  isHeartbeatsMissed,
  isMissingTopologyError,
  type BusCatalog,
} from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';
import type { Slots } from './slots.js';

/** Options of {@link startPriorityPuller}. */
export interface PriorityPullerOptions {
  readonly js: JetStreamClient;
  readonly catalog: BusCatalog;
  readonly resource: string;
  readonly slots: Slots;
  readonly ackWaitMs: number;
  /** Messages of a priority that may wait here, and the most one pull request asks for (≥ 1). */
  readonly pullBatch: number;
  readonly log: Logger;
  /** Runs one message; the slot is released when it settles. Must not throw. */
  readonly handle: (message: JsMsg, priority: Priority) => Promise<void>;
  /**
   * A priority's consumer (or the whole stream) no longer exists, e.g. after the nats-server lost
   * its store. The puller keeps asking whether it is back (a pull every second) and resumes once it
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

  // Find every priority's consumer before returning, so a missing one fails the start.
  const consumers: Array<[Priority, Consumer]> = await Promise.all(
    PRIORITIES.map(async (priority): Promise<[Priority, Consumer]> => {
      const name = catalog.consumers.step(resource, priority);
      return [priority, await js.consumers.get(catalog.streams.steps, name)];
    }),
  );
  // Reports a priority's consumer missing, as a pull finds it.
  const watchStatus = async (priority: Priority, messages: ConsumerMessages) => {
    try {
      for await (const notice of messages.status()) {
        if (CONSUMER_MISSING.has(notice.type)) options.onConsumerMissing?.(priority, notice.type);
      }
    } catch (error) {
      log.warn({ err: error }, 'consumer status watch ended');
    }
  };
  // Whether a priority's consumer exists (a missing one is reported; unsure counts as yes).
  const consumerExists = async (priority: Priority, consumer: Consumer): Promise<boolean> => {
    try {
      await consumer.info();
      return true;
    } catch (error) {
      if (!isMissingTopologyError(error)) return true;
      options.onConsumerMissing?.(priority, 'consumer_not_found');
      return false;
    }
  };
  // Each priority's open pull, closed on stop.
  const pulls = new Map<Priority, ConsumerMessages>();
  // A pull is sent once at least this much of the batch is free (a pull per step while full).
  const refill = Math.ceil(pullBatch / 2);
  const pumps = consumers.map(async ([priority, consumer]) => {
    const queue = waiting.get(priority)!;
    while (!stopped) {
      while (!stopped && pullBatch - queue.length < refill) {
        await new Promise<void>((resolve) => drained.set(priority, resolve));
      }
      if (stopped) break;
      let failed = false;
      try {
        const messages = await consumer.fetch({
          max_messages: pullBatch - queue.length,
          expires: DEFAULT_PULL_EXPIRES_MS,
        });
        pulls.set(priority, messages);
        void watchStatus(priority, messages);
        // Every message is read as it comes (nothing here waits for a slot): no more come than
        // the queue has room for, and in the queue `working()` reaches them.
        for await (const message of messages) {
          if (stopped) {
            handBack(message);
            continue;
          }
          queue.push(message);
          signal();
        }
      } catch (error) {
        // Anything but missed heartbeats is retried after a pause. A pull to a consumer that is
        // gone gets no answer at all (2.9), only missed heartbeats: ask whether it still exists.
        failed = isHeartbeatsMissed(error) ? !(await consumerExists(priority, consumer)) : true;
        if (failed && !stopped && !isHeartbeatsMissed(error)) {
          log.warn({ err: error, priority }, 'pull of step messages failed');
        }
      } finally {
        pulls.delete(priority);
      }
      if (failed && !stopped) await new Promise((resolve) => setTimeout(resolve, PULL_RETRY_MS));
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
      const closing = [...pulls.values()].map((messages) => messages.close());
      // Then hand back what waits for a slot, and let the pumps hand back what the open pulls
      // still bring (closing waits for them to get through it).
      for (const queue of waiting.values()) {
        for (const message of queue) handBack(message);
        queue.length = 0;
      }
      for (const resolve of drained.values()) resolve();
      await Promise.allSettled(closing);
      await dispatcher;
      await Promise.allSettled(pumps);
      await Promise.allSettled([...running]);
    },
  };
}

/** Pause before a priority pulls again after a failed pull (e.g. its consumer is missing). */
const PULL_RETRY_MS = 1_000;

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

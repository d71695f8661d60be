/**
 * Putting the topology back when JetStream lost it.
 *
 * Services ensure their streams, consumers and buckets once at start. A nats-server that comes
 * back without its store (a deleted or corrupted store directory, a fresh node) has none of them:
 * publishes then fail with "no responders" (the client's `JetStreamNotEnabled`), consumers answer
 * "consumer not found", and nothing recreates them unless the services do. Each service builds one
 * repair with its own `ensure` (what it created at start, all idempotent) and reports the errors it
 * sees; a repair runs at most once at a time and, while it fails (the server still down), is tried
 * again with a growing pause until it succeeds.
 */
import { JetStreamApiError } from '@nats-io/jetstream';

/** JetStream API codes that mean an object is gone. */
const STREAM_NOT_FOUND = 10059;
const CONSUMER_NOT_FOUND = 10014;
/** Messages of the pull consumer's own "gone" checks (`consume()`), which carry no API code. */
const GONE_MESSAGES = new Set(['stream not found', 'consumer not found']);
/** Causes followed at most (a BusPublishError wraps the client's error, which wraps the status). */
const MAX_CAUSE_DEPTH = 5;

/**
 * Whether `error` (or one of its causes) says a stream, consumer or KV bucket does not exist:
 * a JetStream API "not found", or "no responders" on a JetStream subject (the client reports that
 * as `JetStreamNotEnabled`; a 2.9 server answers a publish to a subject no stream captures so).
 * No responders also happens while a cluster has no quorum (NATS-NOTES §10 item 9), where a
 * repair attempt is merely wasted, never harmful.
 */
export function isMissingTopologyError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && current instanceof Error; depth++) {
    if (current instanceof JetStreamApiError) {
      if (current.code === STREAM_NOT_FOUND || current.code === CONSUMER_NOT_FOUND) return true;
    }
    if (current.name === 'JetStreamNotEnabled') return true;
    if (GONE_MESSAGES.has(current.message)) return true;
    current = current.cause;
  }
  return false;
}

/** Options of {@link createTopologyRepair}. */
export interface TopologyRepairOptions {
  /** Creates whatever is missing (ensureTopology, ensureStepConsumers …); must be idempotent. */
  readonly ensure: () => Promise<unknown>;
  /** First pause before retrying a failed repair, doubled up to {@link maxRetryMs} (default 500). */
  readonly retryMs?: number;
  /** Longest pause between retries (default 5 000). */
  readonly maxRetryMs?: number;
  /** A repair succeeded (for a log line). */
  readonly onRepaired?: (reason: string) => void;
  /** A repair attempt failed; it is retried. */
  readonly onError?: (error: unknown, reason: string) => void;
}

/** A service's repair of its topology. */
export interface TopologyRepair {
  /**
   * Asks for a repair now. Requests while one runs are folded into one more run after it (what
   * the running one checked may predate the loss).
   */
  request(reason: string): void;
  /** Requests a repair when {@link isMissingTopologyError} says so; returns whether it did. */
  noticeError(error: unknown, context: string): boolean;
  /** Resolves when no repair runs or is due (for tests). */
  idle(): Promise<void>;
  /** Stops retrying; waits for a running attempt. */
  stop(): Promise<void>;
}

export function createTopologyRepair(options: TopologyRepairOptions): TopologyRepair {
  const retryMs = options.retryMs ?? 500;
  const maxRetryMs = options.maxRetryMs ?? 5_000;
  let stopped = false;
  let running: Promise<void> | undefined;
  /** The reason of a request that arrived while a repair ran. */
  let pending: string | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let failures = 0;

  const run = (reason: string): void => {
    if (stopped) return;
    if (running !== undefined) {
      pending = reason;
      return;
    }
    clearTimeout(retryTimer);
    retryTimer = undefined;
    running = (async () => {
      try {
        await options.ensure();
        failures = 0;
        options.onRepaired?.(reason);
      } catch (error) {
        failures += 1;
        options.onError?.(error, reason);
        if (!stopped && pending === undefined) {
          const pause = Math.min(maxRetryMs, retryMs * 2 ** (failures - 1));
          retryTimer = setTimeout(() => run(reason), pause);
        }
      } finally {
        running = undefined;
        const again = pending;
        pending = undefined;
        if (again !== undefined) run(again);
      }
    })();
  };

  return {
    request: run,
    noticeError(error, context) {
      if (!isMissingTopologyError(error)) return false;
      run(context);
      return true;
    },
    async idle() {
      while (running !== undefined || retryTimer !== undefined) {
        if (running !== undefined) await running;
        else await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async stop() {
      stopped = true;
      clearTimeout(retryTimer);
      retryTimer = undefined;
      pending = undefined;
      await running;
    },
  };
}

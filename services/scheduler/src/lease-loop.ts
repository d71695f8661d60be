/**
 * A duty that one scheduler replica runs at a time (the event relay, the reconciler, the dead-letter
 * worker, retention): a batch loop that runs while this replica holds the duty's lease. Each tenure
 * starts a fresh loop, since another replica may have done the work in between, and the loop of a
 * lost tenure is stopped before anything else may lead (the lease's `onLost` is awaited).
 */
import type { KV } from '@nats-io/kv';
import { createLease } from '@sluice/bus';
import type { Logger } from '@sluice/telemetry';
import type { BatchLoop } from './batch-loop.js';

/** One tenure's loop, and what to do once it has stopped. */
export interface LeaseTenure {
  readonly loop: BatchLoop;
  /** Runs after the loop stopped when the tenure ends (e.g. the relay's last marks). */
  readonly end?: () => Promise<void>;
}

export interface LeaseLoopOptions {
  /** The leases bucket (see `openKvBuckets`). */
  readonly kv: KV;
  /** The duty's lease key. */
  readonly key: string;
  /** This replica in the lease. */
  readonly holderId: string;
  readonly ttlMs: number;
  readonly log: Logger;
  /** The duty as log lines name it: `<duty> lease acquired`, `… lost`, `… trouble`. */
  readonly duty: string;
  /** Starts the loop of a tenure; `revision` is its fencing token. */
  startTenure(revision: number): LeaseTenure;
  /** Lease errors, besides their log line (e.g. a notice to the topology repair). */
  readonly onError?: (error: unknown) => void;
}

export interface LeaseLoop {
  /** Starts competing for the lease; resolves after the first attempt. */
  start(): Promise<void>;
  /** Stops competing; as leader, stops the tenure's loop first. Idempotent. */
  stop(): Promise<void>;
  /** Whether this replica leads the duty now. */
  isLeader(): boolean;
  /** Wakes the tenure's loop; nothing while another replica leads. */
  wake(): void;
}

/** Creates the duty's lease; nothing runs until `start()`. */
export function createLeaseLoop(options: LeaseLoopOptions): LeaseLoop {
  const { log, duty } = options;
  let tenure: LeaseTenure | undefined;
  const lease = createLease({
    kv: options.kv,
    key: options.key,
    holderId: options.holderId,
    ttlMs: options.ttlMs,
    onAcquired: (revision) => {
      log.info({ revision }, `${duty} lease acquired`);
      tenure = options.startTenure(revision);
    },
    onLost: async (reason) => {
      log.info({ reason }, `${duty} lease lost`);
      const ending = tenure;
      tenure = undefined;
      await ending?.loop.stop();
      await ending?.end?.();
    },
    onError: (error) => {
      log.warn({ err: error }, `${duty} lease trouble`);
      options.onError?.(error);
    },
  });
  return {
    start: () => lease.start(),
    stop: () => lease.stop(),
    isLeader: () => lease.isLeader(),
    wake: () => tenure?.loop.wake(),
  };
}

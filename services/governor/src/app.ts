/**
 * The governor: turns signals into decisions and publishes them to the governor KV bucket and the
 * `governorDecisions` subject. Several replicas may run; the one holding the `governor` lease acts,
 * the others stand by and take over when its lease is released or expires.
 *
 * For now it measures no signals and always decides `normal`; what is real is the leadership:
 * the lease, the Postgres leader epoch that fences every write, and the hand-over.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  createLease,
  openKvBuckets,
  type Lease,
} from '@sluice/bus';
import { advanceLeaderEpoch, migrateDatabase, openDatabase } from '@sluice/db';
import {
  createLogger,
  createMetrics,
  startMetricsServer,
  type Logger,
  type MetricsServer,
} from '@sluice/telemetry';
import type { GovernorConfig } from './config.js';
import { encodeDecision, normalDecision } from './decision.js';
import { writeDecisionFenced } from './fenced-write.js';
import { GOVERNOR_ROLE } from './leader-epoch.js';
import { startTenure, type Tenure } from './tenure.js';

/** The lease key of the governor in the leases bucket. */
export const GOVERNOR_LEASE_KEY = 'governor';

/** A started governor. */
export interface Governor {
  /** This replica's lease holder id (also the `holder` of the decisions it writes). */
  readonly holder: string;
  /** Port of its `/metrics` endpoint. */
  readonly metricsPort: number;
  /** Whether this replica leads and acts now: it holds the lease, has its epoch, is not deposed. */
  isLeader(): boolean;
  /** The leader epoch of the current tenure while leading; `undefined` otherwise. */
  epoch(): number | undefined;
  /** Stops acting, releases the lease (so a standby takes over at once), closes NATS and the pool. */
  stop(): Promise<void>;
}

/** Makes a holder id unique per process incarnation: a restarted process is a new candidate. */
function newHolderId(): string {
  return `governor-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
}

/**
 * Starts a governor replica: migrates the database, connects to NATS, opens the KV buckets and
 * competes for the lease. Resolves once the first lease attempt is over.
 *
 * @param log the root logger (default: a new one at the configured level)
 * @throws when Postgres or NATS cannot be reached or the buckets cannot be opened; everything
 *   opened so far is closed first.
 */
export async function startGovernor(config: GovernorConfig, log?: Logger): Promise<Governor> {
  const logger = log ?? createLogger({ service: 'governor', level: config.SLUICE_LOG_LEVEL });
  const holder = newHolderId();
  await migrateDatabase(config.DATABASE_URL);
  const database = openDatabase(config.DATABASE_URL, {
    applicationName: 'sluice-governor',
    max: 2,
  });
  let nc: NatsConnection | undefined;
  let lease: Lease | undefined;
  let metricsServer: MetricsServer | undefined;
  let tenure: Tenure | undefined;
  try {
    const conn = await connectNats({ url: config.NATS_URL, name: `governor-${process.pid}` });
    nc = conn;
    const catalog = createBusCatalog(config.SLUICE_PREFIX);
    const buckets = await openKvBuckets(conn, catalog, { leaseTtlMs: config.SLUICE_LEASE_TTL_MS });

    lease = createLease({
      kv: buckets.leases,
      key: GOVERNOR_LEASE_KEY,
      holderId: holder,
      ttlMs: config.SLUICE_LEASE_TTL_MS,
      onAcquired: (revision) => {
        logger.debug({ lease_revision: revision }, 'governor lease won; taking a leader epoch');
        tenure = startTenure({
          holder,
          leaseRevision: revision,
          intervalMs: config.SLUICE_GOVERNOR_INTERVAL_MS,
          advanceEpoch: () => advanceLeaderEpoch(database.db, GOVERNOR_ROLE, holder),
          decide: (epoch) => normalDecision(epoch, holder),
          write: (decision) => writeDecisionFenced(buckets.governor, decision),
          announce: (decision) =>
            conn.publish(catalog.subjects.governorDecisions, encodeDecision(decision)),
          log: logger,
        });
      },
      onLost: async (reason) => {
        const ending = tenure;
        tenure = undefined;
        // `stop()` ends the acting synchronously; only the wait for a write in flight is async.
        const stopped = ending?.stop();
        logger.info({ reason }, 'governor lease lost');
        await stopped;
      },
      onError: (error) => logger.warn({ err: error }, 'governor lease trouble'),
    });
    await lease.start();

    metricsServer = await startMetricsServer({
      port: config.SLUICE_METRICS_PORT,
      registry: createMetrics().registry,
    });
    logger.info({ holder, metrics_port: metricsServer.port }, 'governor started');
  } catch (error) {
    await lease?.stop();
    if (nc) await closeNats(nc);
    await database.close();
    throw error;
  }

  const started = { nc, lease, metricsServer };
  let stopping: Promise<void> | undefined;
  return {
    holder,
    metricsPort: metricsServer.port,
    isLeader: () => started.lease.isLeader() && tenure?.isActing() === true,
    epoch: () => (started.lease.isLeader() ? tenure?.epoch() : undefined),
    stop: () =>
      (stopping ??= (async () => {
        logger.info('governor stopping');
        await started.lease.stop();
        await started.metricsServer.stop();
        await closeNats(started.nc);
        await database.close();
        logger.info('governor stopped');
      })()),
  };
}

/**
 * The governor: turns signals into decisions and publishes them to the governor KV bucket and the
 * `governorDecisions` subject. Several replicas may run; the one holding the `governor` lease acts,
 * the others stand by and take over when its lease is released or expires.
 *
 * The leader reads the seven signals every interval (see `decision-maker.ts`), keeps the circuit
 * breakers (state in Postgres, fenced by its leader epoch) and publishes the decision when it says
 * something new, or to keep it fresh (tenure.ts); every
 * replica listens to the executors' reports, so a standby that takes over has the window at hand.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  createLease,
  decodeDecision,
  decodeExecutorReport,
  DECISIONS_KEY,
  encodeDecision,
  openKvBuckets,
  type Lease,
  type SignalReading,
} from '@sluice/bus';
import type { Subscription } from '@nats-io/transport-node';
import { advanceLeaderEpoch, migrateDatabase, openDatabase } from '@sluice/db';
import { DEFAULT_BREAKER } from '@sluice/core';
import { watchStartup } from '@sluice/runtime';
import {
  createLogger,
  createMetrics,
  startMetricsServer,
  startTracing,
  type Logger,
  type MetricsServer,
  type Tracing,
} from '@sluice/telemetry';
import type { GovernorConfig } from './config.js';
import { clearLeaderGauges, createDecisionMaker } from './decision-maker.js';
import { writeDecisionFenced } from './fenced-write.js';
import { ExecutorReports } from './signals/executor-reports.js';
import { GOVERNOR_ROLE } from './leader-epoch.js';
import { startTenure, type Tenure } from './tenure.js';

/** The lease key of the governor in the leases bucket. */
export const GOVERNOR_LEASE_KEY = 'governor';

/**
 * An unchanged decision is published again this many times within the age at which the services
 * stop obeying it (`SLUICE_DECISION_STALE_MS`): one lost announcement, or a slow tick, leaves it
 * fresh.
 */
const DECISION_REFRESHES_PER_STALE = 4;

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
 * Tracing follows the `OTEL_*` variables (`startTracing`), as in every Sluice service; pass
 * `options.tracing` when the process has started it already (it is then not shut down here).
 *
 * @param log the root logger (default: a new one at the configured level)
 * @throws when Postgres or NATS cannot be reached or the buckets cannot be opened; everything
 *   opened so far is closed first.
 */
export async function startGovernor(
  config: GovernorConfig,
  log?: Logger,
  options: { tracing?: Tracing } = {},
): Promise<Governor> {
  const logger = log ?? createLogger({ service: 'governor', level: config.SLUICE_LOG_LEVEL });
  const holder = newHolderId();
  const startup = watchStartup(logger, 'governor', {
    intervalMs: config.SLUICE_STARTUP_REPORT_MS,
  });
  const database = openDatabase(config.DATABASE_URL, {
    applicationName: 'sluice-governor',
    max: config.SLUICE_DB_POOL_SIZE,
  });
  const tracing = options.tracing ?? startTracing({ serviceName: 'sluice-governor' });
  let nc: NatsConnection | undefined;
  let lease: Lease | undefined;
  let metricsServer: MetricsServer | undefined;
  let tenure: Tenure | undefined;
  let reportSubscription: Subscription | undefined;
  const metrics = createMetrics();
  // Reports older than three governor intervals (at least 3 s) belong to a dead executor.
  const reports = new ExecutorReports(
    config.SLUICE_GOVERNOR_WINDOW_MS,
    Math.max(3_000, 3 * config.SLUICE_GOVERNOR_INTERVAL_MS),
  );
  const breaker = {
    ...DEFAULT_BREAKER,
    windowMs: config.SLUICE_BREAKER_WINDOW_MS,
    minCalls: config.SLUICE_BREAKER_MIN_CALLS,
    failureRate: config.SLUICE_BREAKER_FAILURE_PERCENT / 100,
    consecutiveFailures: config.SLUICE_BREAKER_CONSECUTIVE_FAILURES,
    coolDownMs: config.SLUICE_BREAKER_COOL_DOWN_MS,
    probes: config.SLUICE_BREAKER_PROBES,
    successesToClose: config.SLUICE_BREAKER_SUCCESSES_TO_CLOSE,
    probeTimeoutMs: Math.max(config.SLUICE_BREAKER_COOL_DOWN_MS, 60_000),
  };
  try {
    startup.stage('migrating the database');
    await migrateDatabase(config.DATABASE_URL);
    startup.stage('connecting to NATS');
    const conn = await connectNats({ url: config.NATS_URL, name: `governor-${process.pid}` });
    nc = conn;
    const catalog = createBusCatalog(config.SLUICE_PREFIX);
    startup.stage('opening the KV buckets');
    const buckets = await openKvBuckets(conn, catalog, { leaseTtlMs: config.SLUICE_LEASE_TTL_MS });
    reportSubscription = conn.subscribe(catalog.subjects.executorReports, {
      callback: (error, message) => {
        if (error) return logger.warn({ err: error }, 'executor report subscription failed');
        try {
          reports.add(decodeExecutorReport(message.data), Date.now());
        } catch (decodeError) {
          logger.warn({ err: decodeError }, 'ignored a malformed executor report');
        }
      },
    });
    /** The readings of the decision in KV, so a new leader resumes the levels it finds there. */
    const previousReadings = async (): Promise<readonly SignalReading[]> => {
      try {
        const entry = await buckets.governor.get(DECISIONS_KEY);
        if (entry === null || entry.operation !== 'PUT') return [];
        return decodeDecision(entry.value).signals ?? [];
      } catch (error) {
        logger.warn({ err: error }, 'could not read the previous decision; levels start at normal');
        return [];
      }
    };

    lease = createLease({
      kv: buckets.leases,
      key: GOVERNOR_LEASE_KEY,
      holderId: holder,
      ttlMs: config.SLUICE_LEASE_TTL_MS,
      onAcquired: (revision) => {
        logger.debug({ lease_revision: revision }, 'governor lease won; taking a leader epoch');
        let maker: ReturnType<typeof createDecisionMaker> | undefined;
        const current: Tenure = startTenure({
          holder,
          leaseRevision: revision,
          intervalMs: config.SLUICE_GOVERNOR_INTERVAL_MS,
          // Well inside the age at which the services stop obeying a decision.
          refreshMs: Math.max(
            config.SLUICE_GOVERNOR_INTERVAL_MS,
            Math.floor(config.SLUICE_DECISION_STALE_MS / DECISION_REFRESHES_PER_STALE),
          ),
          advanceEpoch: () => advanceLeaderEpoch(database.db, GOVERNOR_ROLE, holder),
          decide: async (epoch) => {
            maker ??= createDecisionMaker({
              db: database.db,
              reports,
              thresholds: config.SLUICE_GOVERNOR_THRESHOLDS,
              breaker,
              windowMs: config.SLUICE_GOVERNOR_WINDOW_MS,
              retryAfterBaseMs: config.SLUICE_GOVERNOR_RETRY_AFTER_MS,
              holder,
              metrics,
              log: logger,
              previous: await previousReadings(),
            });
            return maker.decide(epoch);
          },
          write: (decision) => writeDecisionFenced(buckets.governor, decision),
          announce: (decision) =>
            conn.publish(catalog.subjects.governorDecisions, encodeDecision(decision)),
          // Unless a later tenure already leads (this one's last decision outlived the stop).
          onEnded: () => {
            if (tenure === undefined || tenure === current) clearLeaderGauges(metrics);
          },
          log: logger,
        });
        tenure = current;
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
    startup.stage('taking part in the leader lease');
    await lease.start();

    startup.stage('starting the metrics server');
    metricsServer = await startMetricsServer({
      port: config.SLUICE_METRICS_PORT,
      host: config.SLUICE_METRICS_HOST,
      registry: metrics.registry,
    });
    logger.info({ holder, metrics_port: metricsServer.port }, 'governor started');
  } catch (error) {
    reportSubscription?.unsubscribe();
    await lease?.stop();
    if (nc) await closeNats(nc);
    await database.close();
    if (!options.tracing) await tracing.shutdown();
    throw error;
  } finally {
    startup.done();
  }

  const started = { nc, lease, metricsServer, reportSubscription };
  let stopping: Promise<void> | undefined;
  return {
    holder,
    metricsPort: metricsServer.port,
    isLeader: () => started.lease.isLeader() && tenure?.isActing() === true,
    epoch: () => (started.lease.isLeader() ? tenure?.epoch() : undefined),
    stop: () =>
      (stopping ??= (async () => {
        logger.info('governor stopping');
        started.reportSubscription.unsubscribe();
        await started.lease.stop();
        await started.metricsServer.stop();
        await closeNats(started.nc);
        await database.close();
        if (!options.tracing) await tracing.shutdown();
        logger.info('governor stopped');
      })()),
  };
}

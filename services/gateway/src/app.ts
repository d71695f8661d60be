/**
 * The gateway: the gRPC API of Sluice. It authenticates, validates, records tasks in Postgres,
 * wakes the scheduler, answers reads from Postgres and streams task events to watchers.
 */
import { status } from '@grpc/grpc-js';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  encodeMessage,
  ensureTopology,
  openGovernorBucket,
  startDecisionView,
  startGuardCapsView,
  type DecisionView,
  type GuardCapsView,
} from '@sluice/bus';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import {
  migrateDatabase,
  openDatabase,
  prepareCreates,
  prepareUrgentClaim,
  type DatabaseHandle,
} from '@sluice/db';
import { configuredAdmission, watchStartup } from '@sluice/runtime';
import {
  createLogger,
  createMetrics,
  startMetricsServer,
  startTracing,
  type Logger,
  type MetricsServer,
  type Tracing,
} from '@sluice/telemetry';
import { createAdminService } from './admin/admin-service.js';
import type { GatewayConfig } from './config.js';
import { createFaultInjection } from './fault-injection.js';
import { createGrpcServer, type GrpcServer } from './grpc/index.js';
import { startEventHub, type EventHub } from './tasks/event-hub.js';
import { createTaskService } from './tasks/task-service.js';

/** A started gateway. */
export interface Gateway {
  /** The port the gRPC API listens on. */
  readonly grpcPort: number;
  readonly metricsPort: number;
  stop(): Promise<void>;
}

/** grpc-js's own default limit on a received message. */
const GRPC_DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;
/** Room for the other fields of a CreateTask request around its input. */
const GRPC_ENVELOPE_HEADROOM_BYTES = 1024 * 1024;

/** How long `stop` lets calls finish (watch streams are ended at once). */
const STOP_GRACE_MS = 5_000;

/**
 * Readies each connection of the pool before the gateway serves: a create's statements run on it
 * once (`prepareCreates`: a connection's first create cost 2–4 times the next ones), and with the
 * urgent claim on, the claim is planned on it (`prepareUrgentClaim`: so the first P0 creates do not
 * plan it while holding an admission lock). Only an optimisation: when it fails, the first creates
 * pay for it themselves.
 */
async function warmUpPool(
  database: DatabaseHandle,
  config: GatewayConfig,
  logger: Logger,
): Promise<void> {
  // As many as the pool opens, read from the pool itself so the two cannot drift apart.
  const connections = database.sql.options.max;
  try {
    await prepareCreates(database.db, connections);
  } catch (error) {
    logger.warn({ err: error }, 'could not run a create ahead; the first creates will pay for it');
  }
  if (config.SLUICE_URGENT_CLAIM !== 'on') return;
  try {
    await prepareUrgentClaim(database.db, connections, configuredAdmission(config));
  } catch (error) {
    logger.warn({ err: error }, 'could not plan the urgent claim ahead; the first P0 creates will');
  }
}

export async function startGateway(
  config: GatewayConfig,
  options: { log?: Logger; tracing?: Tracing } = {},
): Promise<Gateway> {
  const logger =
    options.log ?? createLogger({ service: 'gateway', level: config.SLUICE_LOG_LEVEL });
  const tracing = options.tracing ?? startTracing({ serviceName: 'sluice-gateway' });
  const startup = watchStartup(logger, 'gateway', {
    intervalMs: config.SLUICE_STARTUP_REPORT_MS,
  });
  const database = openDatabase(config.DATABASE_URL, {
    applicationName: 'sluice-gateway',
    max: config.SLUICE_DB_POOL_SIZE,
  });
  let nc: NatsConnection | undefined;
  let hub: EventHub | undefined;
  let grpc: GrpcServer | undefined;
  let metricsServer: MetricsServer | undefined;
  let grpcPort: number;
  let decisions: DecisionView | undefined;
  let guardCaps: GuardCapsView | undefined;
  try {
    startup.stage('migrating the database');
    await migrateDatabase(config.DATABASE_URL);
    startup.stage('connecting to NATS');
    nc = await connectNats({ url: config.NATS_URL, name: `gateway-${process.pid}` });
    const catalog = createBusCatalog(config.SLUICE_PREFIX);
    startup.stage('ensuring the JetStream streams');
    await ensureTopology(await jetstreamManager(nc), catalog);
    const metrics = createMetrics();
    hub = startEventHub(nc, catalog, logger);
    startup.stage('reading the governor decision');
    const governorBucket = openGovernorBucket(nc, catalog);
    decisions = await startDecisionView({
      nc,
      kv: governorBucket,
      subject: catalog.subjects.governorDecisions,
      staleAfterMs: config.SLUICE_DECISION_STALE_MS,
      log: logger,
    });
    guardCaps = startGuardCapsView({ nc, subject: catalog.subjects.guardCaps, log: logger });
    startup.stage('warming up the database pool');
    await warmUpPool(database, config, logger);
    startup.stage('starting the gRPC and metrics servers');
    grpc = createGrpcServer({
      logger,
      unaryDeadlineMs: config.SLUICE_UNARY_TIMEOUT_MS,
      host: config.SLUICE_GRPC_HOST,
      port: config.SLUICE_GRPC_PORT,
      maxReceiveMessageBytes: Math.max(
        GRPC_DEFAULT_MAX_RECEIVE_BYTES,
        config.SLUICE_MAX_INPUT_BYTES + GRPC_ENVELOPE_HEADROOM_BYTES,
      ),
      taskService: createTaskService({
        db: database.db,
        nc,
        catalog,
        hub,
        log: logger,
        metrics,
        tracer: tracing.tracer('@sluice/gateway'),
        maxInputBytes: config.SLUICE_MAX_INPUT_BYTES,
        watchRecheckMs: config.SLUICE_WATCH_RECHECK_MS,
        faultInjection: createFaultInjection(config.SLUICE_FAULT_INJECTION),
        decisions,
        guardCaps,
        ...(config.SLUICE_URGENT_CLAIM === 'on'
          ? { urgentClaim: { js: jetstream(nc), admission: configuredAdmission(config) } }
          : {}),
      }),
      adminService: createAdminService({
        db: database.db,
        log: logger,
        governorKv: governorBucket,
        decisionStaleMs: config.SLUICE_DECISION_STALE_MS,
        guardCaps,
        wakeScheduler: () =>
          nc?.publish(
            catalog.subjects.wake('scheduler'),
            encodeMessage({ type: 'wake', reason: 'dead_letters.redrive' }),
          ),
      }),
      onCallFinished: (call) => {
        const method = call.method.slice(call.method.lastIndexOf('/') + 1);
        // The status name (`OK`, `NOT_FOUND`), as the catalogue and the dashboard expect.
        metrics.grpcRequests.inc({ method, code: status[call.code] });
        if (!call.streaming)
          metrics.grpcRequestDuration.observe({ method }, call.durationMs / 1_000);
      },
    });
    grpcPort = await grpc.start();
    metricsServer = await startMetricsServer({
      port: config.SLUICE_METRICS_PORT,
      host: config.SLUICE_METRICS_HOST,
      registry: metrics.registry,
    });
    if (config.SLUICE_FAULT_INJECTION !== undefined) {
      logger.warn({ fault: config.SLUICE_FAULT_INJECTION }, 'fault injection is on (test only)');
    }
    logger.info({ grpc_port: grpcPort, metrics_port: metricsServer.port }, 'gateway started');
  } catch (error) {
    decisions?.stop();
    guardCaps?.stop();
    await grpc?.stop(0);
    hub?.close();
    if (nc) await closeNats(nc);
    await database.close();
    if (!options.tracing) await tracing.shutdown();
    throw error;
  } finally {
    startup.done();
  }
  const started = { nc, hub, grpc, metricsServer };
  return {
    grpcPort,
    metricsPort: metricsServer.port,
    async stop() {
      logger.info('gateway stopping');
      await started.grpc.stop(STOP_GRACE_MS);
      started.hub.close();
      decisions?.stop();
      guardCaps?.stop();
      await started.metricsServer.stop();
      await closeNats(started.nc);
      await database.close();
      if (!options.tracing) await tracing.shutdown();
      logger.info('gateway stopped');
    },
  };
}

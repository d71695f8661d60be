/**
 * The executor: runs the steps of one resource class. It registers the manifests of the task
 * types it can run, pulls dispatched steps only when a local slot is free, runs them, records their
 * outcomes in Postgres before acknowledging, and aborts steps whose task is cancelled.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  createTopologyRepair,
  decodeMessageOf,
  ensureStepConsumers,
  listsPriority,
  openGovernorBucket,
  startDecisionView,
  type DecisionView,
  ensureTopology,
  isBusMessageError,
  type TopologyRepair,
} from '@sluice/bus';
import { urgentReserveSlots } from '@sluice/core';
import { watchStartup } from '@sluice/runtime';
import {
  GroupWriter,
  KeptConnection,
  migrateDatabase,
  openDatabase,
  recordStepOutcomes,
  startUsualSteps,
  registerTaskType,
  type DatabaseHandle,
  type OutcomeToRecord,
  type StepDispatchRef,
} from '@sluice/db';
import {
  createLogger,
  startTracing,
  createMetrics,
  startMetricsServer,
  type Logger,
  type MetricsServer,
} from '@sluice/telemetry';
import type { ExecutorConfig } from './config.js';
import { startGovernorReporter, type GovernorReporter } from './governor-report.js';
import { startHttpInstrumentation } from './http-instrumentation.js';
import { createLlmGate } from './llm-gate.js';
import { defaultPullBatch, startPriorityPuller, type PriorityPuller } from './priority-puller.js';
import { Slots } from './slots.js';
import { RunningSteps, runDispatchedStep, type StepRunnerDeps } from './step-runner.js';
import {
  createTaskRegistry,
  loadTaskDefinitions,
  manifestOf,
  usesResource,
} from './task-registry.js';

/** A started executor. */
export interface Executor {
  /** Port of its `/metrics` endpoint. */
  readonly metricsPort: number;
  stop(): Promise<void>;
}

/** How long `stop` lets running steps finish before closing connections anyway. */
const STOP_GRACE_MS = 10_000;

/** Starts an executor for `config.SLUICE_RESOURCE`. */
export async function startExecutor(config: ExecutorConfig, log?: Logger): Promise<Executor> {
  const resource = config.SLUICE_RESOURCE;
  const logger =
    log ?? createLogger({ service: `executor-${resource}`, level: config.SLUICE_LOG_LEVEL });
  // Each step attempt is a span in its task's trace (continued from the stored traceparent).
  const tracing = startTracing({ serviceName: `sluice-executor-${resource}` });
  // Every request a step makes (tools, web, MCP, the LLM) is an HTTP client span of that step.
  const http = startHttpInstrumentation();
  const registry = createTaskRegistry(
    await loadTaskDefinitions(config.SLUICE_TASK_MODULES, logger),
  );
  const runnable = registry.definitions.filter((d) => usesResource(d, resource));
  if (runnable.length === 0) {
    logger.warn({ resource }, 'no loaded task type has a step on this resource');
  }

  const startup = watchStartup(logger, `executor-${resource}`, {
    intervalMs: config.SLUICE_STARTUP_REPORT_MS,
  });
  const database: DatabaseHandle = openDatabase(config.DATABASE_URL, {
    applicationName: `sluice-executor-${resource}`,
    max: config.SLUICE_DB_POOL_SIZE,
  });
  // The outcome writer's connection: it writes one transaction at a time, each in one write
  // (recordStepOutcomes), which a connection kept for it sends without waiting for a free one.
  const outcomeConnection = new KeptConnection(database.db);
  let nc: NatsConnection | undefined;
  let puller: PriorityPuller | undefined;
  let topologyRepair: TopologyRepair | undefined;
  let stopping = false;
  let cancelSubscription: Subscription | undefined;
  let metricsServer: MetricsServer | undefined;
  const slots = new Slots(
    config.SLUICE_EXECUTOR_SLOTS,
    urgentReserveSlots(config.SLUICE_EXECUTOR_SLOTS, config.SLUICE_URGENT_RESERVE_PERCENT),
  );
  // One gate for every step's LLM calls: it finds the provider's limit and keeps the budgets.
  const llmGate = createLlmGate({
    minConcurrency: config.SLUICE_LLM_MIN_CONCURRENCY,
    maxConcurrency: config.SLUICE_LLM_MAX_CONCURRENCY,
    initialConcurrency: config.SLUICE_LLM_INITIAL_CONCURRENCY,
    backoffRatio: config.SLUICE_LLM_BACKOFF_PERCENT / 100,
    decreaseIntervalMs: config.SLUICE_LLM_DECREASE_INTERVAL_MS,
    ...(config.SLUICE_LLM_LATENCY_TOLERANCE_PERCENT > 0
      ? { latencyTolerance: config.SLUICE_LLM_LATENCY_TOLERANCE_PERCENT / 100 }
      : {}),
    requestsPerMinute: config.SLUICE_LLM_REQUESTS_PER_MINUTE,
    tokensPerMinute: config.SLUICE_LLM_TOKENS_PER_MINUTE,
  });
  let decisions: DecisionView | undefined;
  let reporter: GovernorReporter | undefined;
  try {
    startup.stage('migrating the database');
    await migrateDatabase(config.DATABASE_URL);
    startup.stage('registering the task types');
    for (const definition of runnable) {
      await registerTaskType(database.db, manifestOf(definition));
    }
    startup.stage('connecting to NATS');
    nc = await connectNats({ url: config.NATS_URL, name: `executor-${resource}-${process.pid}` });
    const catalog = createBusCatalog(config.SLUICE_PREFIX);
    startup.stage('ensuring the JetStream streams and consumers');
    const jsm = await jetstreamManager(nc);
    const ensureOwnTopology = async () => {
      await ensureTopology(jsm, catalog);
      await ensureStepConsumers(jsm, catalog, resource, {
        ackWaitMs: config.SLUICE_ACK_WAIT_MS,
        maxDeliver: config.SLUICE_MAX_DELIVER,
      });
    };
    await ensureOwnTopology();
    // A nats-server that lost its store comes back without the step consumers; the pulls only
    // resume once someone recreates them, and this executor is the one that created them.
    const repair = createTopologyRepair({
      ensure: ensureOwnTopology,
      onRepaired: (reason) => logger.warn({ reason }, 'recreated missing step consumers'),
      onError: (error, reason) =>
        logger.warn({ err: error, reason }, 'could not recreate the step consumers yet; retrying'),
    });
    topologyRepair = repair;

    const metrics = createMetrics();
    const running = new RunningSteps();
    const conn = nc;
    startup.stage('reading the governor decision');
    const governorBucket = openGovernorBucket(conn, catalog);
    decisions = await startDecisionView({
      nc: conn,
      kv: governorBucket,
      subject: catalog.subjects.governorDecisions,
      staleAfterMs: config.SLUICE_DECISION_STALE_MS,
      log: logger,
    });
    const view = decisions;
    reporter = startGovernorReporter({
      resource,
      slots,
      gate: llmGate,
      intervalMs: config.SLUICE_REPORT_INTERVAL_MS,
      publish: (data) => conn.publish(catalog.subjects.executorReports, data),
      onError: (error) => logger.warn({ err: error }, 'could not report to the governor'),
    });
    const counting = reporter;
    const deps: StepRunnerDeps = {
      db: database.db,
      nc,
      catalog,
      registry,
      llm: {
        baseUrl: config.SLUICE_LLM_BASE_URL,
        apiKey: config.SLUICE_LLM_API_KEY,
        model: config.SLUICE_LLM_MODEL,
      },
      log: logger,
      metrics,
      resource,
      heartbeatMs: config.SLUICE_HEARTBEAT_MS,
      ackWaitMs: config.SLUICE_ACK_WAIT_MS,
      running,
      starts: new GroupWriter((refs: StepDispatchRef[]) =>
        startUsualSteps(database.db, refs, config.SLUICE_ACK_WAIT_MS),
      ),
      outcomes: new GroupWriter((items: OutcomeToRecord[]) =>
        recordStepOutcomes(outcomeConnection, items),
      ),
      llmGate,
      isDegraded: (priority) => listsPriority(view.current().degrade, priority),
      isBreakerOpen: () => view.current().breakers?.[resource] === 'open',
      onOutcome: (outcome) => counting.count(outcome),
      databaseOutage: {
        stopping: () => stopping,
        maxPauseMs: Math.min(2_000, Math.floor(config.SLUICE_ACK_WAIT_MS / 3)),
      },
    };

    cancelSubscription = nc.subscribe(catalog.subjects.cancelAll, {
      callback: (error, message) => {
        if (error) return logger.warn({ err: error }, 'cancel subscription failed');
        try {
          const request = decodeMessageOf('task.cancel', message.subject, message.data);
          const aborted = running.cancel(request.task_id);
          if (aborted > 0)
            logger.info({ task_id: request.task_id, aborted }, 'aborting cancelled task');
        } catch (decodeError) {
          logger.warn({ err: decodeError }, 'ignored a malformed cancel request');
        }
      },
    });

    // Busy = steps being handled. Not slots.inUse: the puller takes a slot before it waits for a
    // message and gives it back only after the handler returns, so that reads one high.
    let busy = 0;
    const utilization = () => metrics.workerUtilization.set({ resource }, busy / slots.capacity);
    utilization();
    startup.stage('starting the pulls of its consumers');
    puller = await startPriorityPuller({
      js: jetstream(nc),
      catalog,
      resource,
      slots,
      ackWaitMs: config.SLUICE_ACK_WAIT_MS,
      pullBatch:
        config.SLUICE_EXECUTOR_PULL_BATCH ?? defaultPullBatch(config.SLUICE_EXECUTOR_SLOTS),
      log: logger,
      onConsumerMissing: (priority, notice) => repair.request(`${notice} (P${priority})`),
      handle: async (message) => {
        busy += 1;
        utilization();
        try {
          const dispatch = decodeMessageOf('step.dispatch', message.subject, message.data);
          await runDispatchedStep(deps, message, dispatch);
        } catch (error) {
          if (isBusMessageError(error)) {
            // A message no executor can ever read: drop it rather than redeliver it forever.
            logger.error(
              { err: error, subject: message.subject },
              'terminating a malformed step message',
            );
            message.term();
          } else {
            // Postgres or NATS trouble: hand the message back for a later attempt.
            logger.error({ err: error }, 'step could not be processed; it will be redelivered');
            message.nak(Math.min(config.SLUICE_ACK_WAIT_MS, 5_000));
          }
        } finally {
          busy -= 1;
          utilization();
        }
      },
    });
    startup.stage('starting the metrics server');
    metricsServer = await startMetricsServer({
      port: config.SLUICE_METRICS_PORT,
      host: config.SLUICE_METRICS_HOST,
      registry: metrics.registry,
    });
    logger.info(
      {
        resource,
        slots: slots.capacity,
        task_types: runnable.map((d) => `${d.name}@${d.version}`),
        metrics_port: metricsServer.port,
      },
      'executor started',
    );
  } catch (error) {
    reporter?.stop();
    decisions?.stop();
    llmGate.close();
    await topologyRepair?.stop();
    await puller?.stop();
    cancelSubscription?.unsubscribe();
    if (nc) await closeNats(nc);
    await outcomeConnection.close();
    await database.close();
    http.stop();
    await tracing.shutdown();
    throw error;
  } finally {
    startup.done();
  }

  const started = { nc, puller, cancelSubscription, metricsServer };
  return {
    metricsPort: metricsServer.port,
    async stop() {
      logger.info('executor stopping');
      stopping = true;
      const grace = new Promise((resolve) => setTimeout(resolve, STOP_GRACE_MS).unref());
      await topologyRepair?.stop();
      await Promise.race([started.puller.stop(), grace]);
      reporter?.stop();
      decisions?.stop();
      llmGate.close();
      started.cancelSubscription.unsubscribe();
      await started.metricsServer.stop();
      await closeNats(started.nc);
      await outcomeConnection.close();
      await database.close();
      http.stop();
      await tracing.shutdown();
      logger.info('executor stopped');
    },
  };
}

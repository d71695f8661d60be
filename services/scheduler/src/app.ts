/**
 * The scheduler: admits ready steps and dispatches them, turns recorded outcomes into transitions,
 * — while it holds the relay lease — relays task events, and — while it holds the reconciler lease —
 * dispatches again steps whose dispatch was lost, and — while it holds the dead-letter lease — turns
 * JetStream's max-deliveries advisories into dead letters, and — while it holds the retention lease —
 * deletes old finished tasks (retention.ts). Several replicas may run: claims use
 * `SKIP LOCKED`, and one lease holder relays (one reconciles, one handles advisories) at a time.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import {
  closeNats,
  connectNats,
  createBusCatalog,
  createTopologyRepair,
  encodeGuardCaps,
  encodeMessage,
  ensureDeadLetterConsumer,
  ensureTopology,
  openKvBuckets,
  startDecisionView,
  type DecisionView,
  type TopologyRepair,
} from '@sluice/bus';
import {
  KeptConnection,
  listenForTaskEvents,
  migrateDatabase,
  msUntilNextReadyStep,
  openDatabase,
  type AdmissionSettings,
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
import { handleAdvisoryBatch } from './advisory-worker.js';
import { startBatchLoop, type BatchLoop } from './batch-loop.js';
import { failFastBatch, openBreakerResources } from './breaker-fail-fast.js';
import { idlePollMsOf, type SchedulerConfig } from './config.js';
import { dispatchBatch, type DispatchPass } from './dispatcher.js';
import { FreedSlots } from './freed-slots.js';
import { PublicationRecorder } from './publication-recorder.js';
import { FullResources, readyStepOf } from './full-resources.js';
import { createEventRelay, type EventRelay } from './event-relay.js';
import { TaskHistory } from './task-history.js';
import { applyOutcomeBatch } from './outcome-applier.js';
import { createReconciler } from './reconciler.js';
import { retryBudgetConfigOf } from './retry-budget-config.js';
import { createRetryBudgetLedger } from './retry-budget-ledger.js';
import { STEP_RESULT_QUEUE, appliedResourceOf } from './step-results.js';
import { startRetention } from './retention.js';
import { createLeaseLoop, type LeaseLoop } from './lease-loop.js';
import { refreshQueueTableStatistics } from './table-statistics.js';
import { settleBatch } from './settler.js';
import { fireTimerBatch } from './timer-firer.js';
import { createGovernedAdmission } from './governed-admission.js';
import { UrgentWaitGuard } from './urgent-wait-guard.js';
import { startUrgentWaitWatch } from './urgent-wait-watch.js';

/** A started scheduler. */
export interface Scheduler {
  readonly metricsPort: number;
  /** Whether this replica holds the event relay lease now. */
  isRelayLeader(): boolean;
  /** Whether this replica holds the reconciler lease now. */
  isReconcilerLeader(): boolean;
  /** Whether this replica holds the dead-letter (advisory worker) lease now. */
  isDeadLetterLeader(): boolean;
  /** Whether this replica holds the retention lease now (and retention is on). */
  isRetentionLeader(): boolean;
  stop(): Promise<void>;
}

/** The lease key of the event relay in the leases bucket. */
export const RELAY_LEASE_KEY = 'relay';

/** The lease key of the reconciler in the leases bucket. */
export const RECONCILER_LEASE_KEY = 'reconciler';

/** The lease key of the advisory worker (dead letters from JetStream) in the leases bucket. */
export const DEAD_LETTER_LEASE_KEY = 'dead_letters';

/**
 * Starts a scheduler. Tracing follows the `OTEL_*` variables (`startTracing`): dispatches, applied
 * outcomes, fired timers and settled tasks are spans in their tasks' traces (task-trace.ts). Pass
 * `options.tracing` when the process has started tracing already (it is then not shut down here).
 */
export async function startScheduler(
  config: SchedulerConfig,
  log?: Logger,
  options: { tracing?: Tracing } = {},
): Promise<Scheduler> {
  const logger = log ?? createLogger({ service: 'scheduler', level: config.SLUICE_LOG_LEVEL });
  const startup = watchStartup(logger, 'scheduler', {
    intervalMs: config.SLUICE_STARTUP_REPORT_MS,
  });
  const database = openDatabase(config.DATABASE_URL, {
    applicationName: 'sluice-scheduler',
    max: config.SLUICE_DB_POOL_SIZE,
  });
  const tracing = options.tracing ?? startTracing({ serviceName: 'sluice-scheduler' });
  const loops: BatchLoop[] = [];
  const subscriptions: Subscription[] = [];
  let nc: NatsConnection | undefined;
  /** The leader duties, each run by one replica at a time (lease-loop.ts). */
  let relayDuty: LeaseLoop | undefined;
  let reconcilerDuty: LeaseLoop | undefined;
  let deadLetterDuty: LeaseLoop | undefined;
  let retentionDuty: LeaseLoop | undefined;
  let topologyRepair: TopologyRepair | undefined;
  let metricsServer: MetricsServer | undefined;
  let eventsListener: { unlisten(): Promise<void> } | undefined;
  let decisions: DecisionView | undefined;
  let publications: PublicationRecorder | undefined;
  let claimConnection: KeptConnection | undefined;
  try {
    startup.stage('migrating the database');
    await migrateDatabase(config.DATABASE_URL);
    startup.stage('connecting to NATS');
    // A const for the closures below (nc itself stays assignable for the cleanup on failure).
    const connection = await connectNats({
      url: config.NATS_URL,
      name: `scheduler-${process.pid}`,
    });
    nc = connection;
    const catalog = createBusCatalog(config.SLUICE_PREFIX);
    // This replica in the leases and in its guard caps notices.
    const holderId = `scheduler-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    startup.stage('ensuring the JetStream streams and consumers');
    const jsm = await jetstreamManager(nc);
    await ensureTopology(jsm, catalog);
    await ensureDeadLetterConsumer(jsm, catalog);
    const js = jetstream(nc);
    // A nats-server may come back without its store: then every publish, lease renewal and
    // stream read fails until what was ensured above exists again, and nothing else recreates it.
    const repair = createTopologyRepair({
      ensure: async () => {
        await ensureTopology(jsm, catalog);
        await ensureDeadLetterConsumer(jsm, catalog);
        await openKvBuckets(connection, catalog, { leaseTtlMs: config.SLUICE_LEASE_TTL_MS });
      },
      onRepaired: (reason) =>
        logger.warn({ reason }, 'recreated missing NATS streams, consumers and buckets'),
      onError: (error, reason) =>
        logger.warn({ err: error, reason }, 'could not recreate the NATS topology yet; retrying'),
    });
    topologyRepair = repair;
    const noticeBusError = (context: string) => (error: unknown) => {
      repair.noticeError(error, context);
    };
    const metrics = createMetrics();
    // Per replica, in memory (see retry-budget-ledger.ts for why).
    const retryBudget = createRetryBudgetLedger(retryBudgetConfigOf(config));
    const common = {
      db: database.db,
      log: logger,
      metrics,
      batchSize: config.SLUICE_SCHEDULER_BATCH,
    };

    startup.stage('opening the KV buckets and reading the governor decision');
    const { leases, governor: governorBucket } = await openKvBuckets(nc, catalog, {
      leaseTtlMs: config.SLUICE_LEASE_TTL_MS,
    });
    // Holds, throttles, limits and open breakers come from the governor's live decision; a new
    // decision wakes the dispatcher, so a released hold is admitted at once (and the fail-fast
    // pass, so steps that would rather fail do so as soon as a breaker opens).
    let wakeOnDecision = (): void => undefined;
    decisions = await startDecisionView({
      nc,
      kv: governorBucket,
      subject: catalog.subjects.governorDecisions,
      staleAfterMs: config.SLUICE_DECISION_STALE_MS,
      onChange: () => wakeOnDecision(),
      log: logger,
    });
    const admission = createGovernedAdmission({
      base: configuredAdmission(config),
      view: decisions,
      metrics,
    });
    // P0's wait under a flood of lower priorities (urgent-wait-guard.ts): caps their admission
    // while P0 steps wait longer than the target.
    const urgentGuard =
      config.SLUICE_URGENT_WAIT_TARGET_MS > 0
        ? new UrgentWaitGuard({
            targetMs: config.SLUICE_URGENT_WAIT_TARGET_MS,
            floor: config.SLUICE_URGENT_WAIT_FLOOR,
          })
        : undefined;
    let urgentWatch: BatchLoop | undefined;
    /** P0 work seen in `resource`: at its onset there, the guard reads at once. */
    const noteUrgentWork = (resource: string): void => {
      if (urgentGuard?.urgentWorkSeen(Date.now(), resource)) urgentWatch?.wake();
    };
    const admissionSettings = (): AdmissionSettings => {
      const settings = admission.settings();
      return urgentGuard ? { ...settings, lowerPriorityCaps: urgentGuard.caps() } : settings;
    };
    const fullResources = new FullResources();
    const freedSlots = new FreedSlots();
    publications = new PublicationRecorder({
      db: database.db,
      log: logger,
      delayMs: Math.min(1_000, Math.floor(config.SLUICE_DISPATCH_GRACE_MS / 4)),
    });
    claimConnection = new KeptConnection(database.db);
    const idlePollMs = idlePollMsOf(config);
    const dispatcher = startBatchLoop({
      name: 'dispatch',
      pollMs: config.SLUICE_SCHEDULER_POLL_MS,
      idlePollMs,
      log: logger,
      runBatch: async ({ polled }) => {
        freedSlots.passStarted();
        let pass: DispatchPass;
        try {
          pass = await dispatchBatch({
            ...common,
            js,
            catalog,
            admission: admissionSettings,
            claimConnection,
            publications,
            onPublishFailed: noticeBusError('dispatch'),
          });
        } catch (error) {
          freedSlots.passEnded(undefined);
          throw error;
        }
        fullResources.seen(pass.full);
        pass.urgentResources.forEach(noteUrgentWork);
        const more = freedSlots.passEnded(pass) || pass.more;
        // A poll that claimed nothing and left no due step waiting for room: idle until a step's
        // backoff ends (a woken pass that finds nothing is a busy system's, and asks nothing).
        const idle = polled && pass.claimed === 0 && !pass.leftBehind && pass.full.length === 0;
        if (more || !idle) return { more, handled: pass.claimed };
        const dueInMs = await msUntilNextReadyStep(database.db);
        return {
          more: false,
          handled: 0,
          idle: true,
          ...(dueInMs === undefined ? {} : { dueInMs }),
        };
      },
    });
    const abortRunningSteps = (taskIds: readonly string[]) => {
      for (const taskId of taskIds) {
        connection.publish(
          catalog.subjects.cancel(taskId),
          encodeMessage({ type: 'task.cancel', task_id: taskId }),
        );
      }
    };
    const timers = startBatchLoop({
      name: 'timers',
      pollMs: config.SLUICE_SCHEDULER_POLL_MS,
      idlePollMs,
      log: logger,
      runBatch: () => fireTimerBatch({ ...common, onStepsReady: () => dispatcher.wake() }),
    });
    // Timers armed by an outcome or a settle (a backoff, an approval's deadline) wake the timer
    // loop, which may be sleeping until a later one.
    const wakeTimers = () => timers.wake();
    const applier = startBatchLoop({
      name: 'outcomes',
      pollMs: config.SLUICE_SCHEDULER_POLL_MS,
      idlePollMs,
      log: logger,
      runBatch: async () => {
        // Told only after a pass that applied outcomes.
        let settleDue: boolean | undefined;
        const moreOutcomes = await applyOutcomeBatch({
          ...common,
          onStepsReady: () => dispatcher.wake(),
          onTimersArmed: wakeTimers,
          // A fan-out branch's retry: the dispatcher looks when its backoff ends.
          onStepsDueIn: (ms) => dispatcher.wakeIn(ms),
          abortRunningSteps,
          retryBudget,
          onSettleChecked: (due) => (settleDue = due),
        });
        const applied = settleDue !== undefined;
        const { more: moreToSettle, settled } = await settleBatch(
          { ...common, onTimersArmed: wakeTimers },
          settleDue,
        );
        return {
          more: moreOutcomes || moreToSettle,
          // (The outcomes applied are not counted: this loop gathers nothing.)
          handled: settled,
          idle: !applied && settled === 0,
        };
      },
    });
    // Steps declaring `whileBreakerOpen: 'fail'` fail fast as retryable while their resource's
    // breaker is open, instead of waiting like the rest (breaker-fail-fast.ts).
    const failFast = startBatchLoop({
      name: 'breaker-fail-fast',
      pollMs: config.SLUICE_SCHEDULER_POLL_MS,
      log: logger,
      runBatch: () =>
        failFastBatch({
          db: database.db,
          log: logger,
          batchSize: config.SLUICE_SCHEDULER_BATCH,
          openResources: () => openBreakerResources(decisions?.current().breakers),
          onOutcomesRecorded: () => applier.wake(),
        }),
    });
    wakeOnDecision = () => {
      dispatcher.wake();
      failFast.wake();
    };
    loops.push(dispatcher, applier, timers, failFast);
    if (urgentGuard) {
      urgentWatch = startUrgentWaitWatch({
        db: database.db,
        guard: urgentGuard,
        log: logger,
        metrics,
        onCapsRaised: () => dispatcher.wake(),
        // For GetTask's waiting_for: the gateways cannot see this replica's caps otherwise.
        publishCaps: (caps) =>
          connection.publish(
            catalog.subjects.guardCaps,
            encodeGuardCaps({ scheduler_id: holderId, caps }),
          ),
      });
      loops.push(urgentWatch);
    }
    if (config.SLUICE_STATISTICS_CHECK_MS > 0) {
      loops.push(
        startBatchLoop({
          name: 'table-statistics',
          pollMs: config.SLUICE_STATISTICS_CHECK_MS,
          log: logger,
          runBatch: () => refreshQueueTableStatistics({ db: database.db, log: logger }),
        }),
      );
    }

    subscriptions.push(
      nc.subscribe(catalog.subjects.wake('scheduler'), {
        // A wake-up may mean new ready steps, a requested pause or cancel, or a released step.
        callback: () => {
          dispatcher.wake();
          applier.wake();
          failFast.wake();
        },
      }),
      // New ready steps (a created task): admission only; the outcome and settle passes would find
      // nothing (each pass costs them a statement or two, and creates come one by one). Nor does
      // admission when the step's resource is full (full-resources.ts).
      nc.subscribe(catalog.subjects.wake('dispatch'), {
        callback: (error, message) => {
          const step = error ? undefined : readyStepOf(message.subject, message.data, logger);
          if (step?.priority === 0) noteUrgentWork(step.resource);
          // A step the gateway dispatched itself (its urgent claim) is neither ready nor failing.
          if (step?.dispatched) return;
          if (step === undefined || !fullResources.admitsNothingFor(step)) dispatcher.wake();
          failFast.wake();
        },
      }),
      // A recorded outcome also ended a step in flight: its slot is free, so a step kept back by
      // a limit may be admitted now rather than at the next poll — if the last pass left any
      // (freed-slots.ts). One replica of the group hears each (step-results.ts).
      nc.subscribe(catalog.subjects.stepResult, {
        queue: STEP_RESULT_QUEUE,
        callback: (error, message) => {
          const applied = error
            ? undefined
            : appliedResourceOf(message.subject, message.data, logger);
          if (applied === undefined) applier.wake();
          else retryBudget.recordAttempt(applied);
          if (freedSlots.slotFreed()) dispatcher.wake();
        },
      }),
      nc.subscribe(catalog.subjects.wake('relay'), { callback: () => relayDuty?.wake() }),
    );
    // Every committed batch of task events notifies this channel, whoever wrote it.
    startup.stage('listening for task events');
    eventsListener = await listenForTaskEvents(database.sql, () => relayDuty?.wake());

    startup.stage('taking part in the leader leases');
    const duty = { kv: leases, holderId, ttlMs: config.SLUICE_LEASE_TTL_MS, log: logger };
    const noticeLeaseError = (error: unknown) => repair.noticeError(error, 'lease');
    relayDuty = createLeaseLoop({
      ...duty,
      key: RELAY_LEASE_KEY,
      duty: 'event relay',
      startTenure: () => {
        // Fresh with each lease: another scheduler relayed the events in between.
        const events = createEventRelay({
          ...common,
          js,
          catalog,
          taskHistory: new TaskHistory(),
          onPublishFailed: noticeBusError('relay'),
        });
        const loop = startBatchLoop({
          name: 'relay',
          pollMs: config.SLUICE_SCHEDULER_POLL_MS,
          // Woken by Postgres itself (the events' NOTIFY): the poll is for a lost connection.
          idlePollMs,
          gatherMs: config.SLUICE_RELAY_GATHER_MS,
          log: logger,
          runBatch: () => events.runBatch(),
        });
        return { loop, end: () => flushEventMarks(events, logger) };
      },
      onError: noticeLeaseError,
    });
    await relayDuty.start();
    reconcilerDuty = createLeaseLoop({
      ...duty,
      key: RECONCILER_LEASE_KEY,
      duty: 'reconciler',
      startTenure: () => {
        // A fresh reconciler per tenure: its scan starts over from the first step.
        const reconciler = createReconciler({
          db: database.db,
          jsm,
          catalog,
          log: logger,
          metrics,
          batchSize: config.SLUICE_SCHEDULER_BATCH,
          graceMs: config.SLUICE_DISPATCH_GRACE_MS,
          staleMs: config.SLUICE_STEP_STALE_MS,
          maxDispatches: config.SLUICE_MAX_DISPATCHES,
          onStepsReady: () => dispatcher.wake(),
          onOutcomesRecorded: () => applier.wake(),
        });
        const loop = startBatchLoop({
          name: 'reconcile',
          pollMs: config.SLUICE_RECONCILE_INTERVAL_MS,
          log: logger,
          runBatch: async () => (await reconciler.reconcileBatch()).more,
          onError: noticeBusError('reconcile'),
        });
        return { loop };
      },
      onError: noticeLeaseError,
    });
    await reconcilerDuty.start();
    deadLetterDuty = createLeaseLoop({
      ...duty,
      key: DEAD_LETTER_LEASE_KEY,
      duty: 'dead-letter',
      startTenure: () => ({
        // Each batch waits for advisories (a short fetch), so the poll interval adds no delay.
        loop: startBatchLoop({
          name: 'advisories',
          pollMs: config.SLUICE_SCHEDULER_POLL_MS,
          // Dead letters are not urgent: a quiet system asks for advisories less often.
          idlePollMs,
          log: logger,
          runBatch: () =>
            handleAdvisoryBatch({
              ...common,
              js,
              jsm,
              catalog,
              onOutcomesRecorded: () => applier.wake(),
            }),
          onError: noticeBusError('advisories'),
        }),
      }),
      onError: noticeLeaseError,
    });
    await deadLetterDuty.start();
    if (config.SLUICE_RETENTION_BATCH > 0) {
      retentionDuty = await startRetention({
        ...common,
        batchSize: config.SLUICE_RETENTION_BATCH,
        ageMs: config.SLUICE_RETENTION_AGE,
        tombstoneTtlMs: config.SLUICE_TOMBSTONE_TTL,
        intervalMs: config.SLUICE_RETENTION_INTERVAL_MS,
        kv: leases,
        holderId,
        leaseTtlMs: config.SLUICE_LEASE_TTL_MS,
      });
    }
    startup.stage('starting the metrics server');
    metricsServer = await startMetricsServer({
      port: config.SLUICE_METRICS_PORT,
      host: config.SLUICE_METRICS_HOST,
      registry: metrics.registry,
    });
    logger.info(
      {
        metrics_port: metricsServer.port,
        relay_leader: relayDuty.isLeader(),
        reconciler_leader: reconcilerDuty.isLeader(),
        dead_letter_leader: deadLetterDuty.isLeader(),
      },
      'scheduler started',
    );
  } catch (error) {
    decisions?.stop();
    await topologyRepair?.stop();
    await Promise.allSettled(loops.map((loop) => loop.stop()));
    await claimConnection?.close();
    await publications?.stop();
    await eventsListener?.unlisten();
    await retentionDuty?.stop();
    await deadLetterDuty?.stop();
    await reconcilerDuty?.stop();
    await relayDuty?.stop();
    if (nc) await closeNats(nc);
    await database.close();
    if (!options.tracing) await tracing.shutdown();
    throw error;
  } finally {
    startup.done();
  }

  const started = {
    nc,
    relayDuty,
    reconcilerDuty,
    deadLetterDuty,
    metricsServer,
    eventsListener,
  };
  return {
    metricsPort: metricsServer.port,
    isRelayLeader: () => started.relayDuty.isLeader(),
    isReconcilerLeader: () => started.reconcilerDuty.isLeader(),
    isDeadLetterLeader: () => started.deadLetterDuty.isLeader(),
    isRetentionLeader: () => retentionDuty?.isLeader() ?? false,
    async stop() {
      logger.info('scheduler stopping');
      for (const subscription of subscriptions) subscription.unsubscribe();
      decisions?.stop();
      await started.eventsListener.unlisten();
      await retentionDuty?.stop();
      await started.deadLetterDuty.stop();
      await started.reconcilerDuty.stop();
      await started.relayDuty.stop();
      await Promise.allSettled(loops.map((loop) => loop.stop()));
      // After the dispatcher's last pass, before the database closes.
      await claimConnection?.close();
      await publications?.stop();
      await topologyRepair?.stop();
      await started.metricsServer.stop();
      await closeNats(started.nc);
      await database.close();
      // Flushes the spans still buffered for export.
      if (!options.tracing) await tracing.shutdown();
      logger.info('scheduler stopped');
    },
  };
}

/**
 * Marks what the relay of an ending tenure published (its loop stopped). A failure only costs
 * republication: the next holder of the lease reads those events as unpublished and publishes them
 * again, which the stream's duplicate window absorbs.
 */
async function flushEventMarks(relay: EventRelay, logger: Logger): Promise<void> {
  try {
    await relay.flush();
  } catch (error) {
    logger.warn(
      { err: error, unmarked: relay.unmarked },
      'event relay could not mark its last publications; they will be published again',
    );
  }
}

/**
 * One leadership tenure's decisions: every interval it reads the seven signals (Postgres for the
 * queue, latencies, retries and connections; the executors' reports for busy slots, LLM 429s and
 * tool outcomes; the reads of the step tables at a pace their cost allows, paced-read.ts), moves
 * their levels on with hysteresis, moves the breakers on, applies the
 * operators' overrides and composes the decision document the tenure publishes.
 */
import { ADMISSION_LEVELS, type GovernorDecision, type SignalReading } from '@sluice/bus';
import { PRIORITIES, priorityLabel, type BreakerConfig, type Priority } from '@sluice/core';
import {
  activeOverrides,
  databaseConnectionUsage,
  loadBreakers,
  queueDepths,
  retryShare,
  saveBreaker,
  stepLatencies,
  type Database,
  type QueueDepths,
  type RetryShare,
  type StepLatency,
} from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';
import { BreakerKeeper, hasBreaker } from './breakers/breaker-keeper.js';
import { composeDecision } from './compose-decision.js';
import { PressureBook, type Reading } from './pressure/levels.js';
import type { ThresholdTable } from './pressure/thresholds.js';
import type { ExecutorReports } from './signals/executor-reports.js';
import { PacedRead } from './signals/paced-read.js';

/** Fewer step starts than this in the window say nothing about a retry storm. */
const MIN_STARTS_FOR_RETRY_SHARE = 20;

/**
 * The share of time the governor's reads of the step tables may take, each (see paced-read.ts):
 * a read that grew to 100 ms with the backlog is taken every 5 s instead of every tick; one of 20 ms
 * or less, at every tick (1 s). Levels dwell 10 s before they move.
 */
const STEP_READ_DUTY_SHARE = 0.02;

export interface DecisionMakerDeps {
  readonly db: Database;
  readonly reports: ExecutorReports;
  readonly thresholds: ThresholdTable;
  readonly breaker: BreakerConfig;
  readonly windowMs: number;
  readonly retryAfterBaseMs: number;
  readonly holder: string;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The readings of the decision found in KV when the tenure began (to resume levels). */
  readonly previous?: readonly SignalReading[];
  readonly now?: () => number;
}

export interface DecisionMaker {
  /** The decision of this tick; `undefined` when a fenced write showed a newer leader. */
  decide(epoch: number): Promise<GovernorDecision | undefined>;
}

/** Creates the decision maker of one tenure (breakers are loaded on its first tick). */
export function createDecisionMaker(deps: DecisionMakerDeps): DecisionMaker {
  const now = deps.now ?? Date.now;
  const book = new PressureBook(deps.thresholds);
  if (deps.previous) book.seed(deps.previous, now());
  let keeper: BreakerKeeper | undefined;
  /** The level each (signal, scope) was at last tick, to count entries into a level. */
  const entered = new Map<string, string>();
  const paced = { dutyShare: STEP_READ_DUTY_SHARE, now };
  const stepReads: StepReads = {
    depths: new PacedRead(() => queueDepths(deps.db), paced),
    latencies: new PacedRead(() => stepLatencies(deps.db, deps.windowMs), paced),
    retries: new PacedRead(() => retryShare(deps.db, deps.windowMs), paced),
  };

  return {
    async decide(epoch) {
      if (keeper === undefined) {
        keeper = new BreakerKeeper(deps.breaker, {
          load: () => loadBreakers(deps.db),
          save: (resource, state, transition) =>
            saveBreaker(deps.db, { resource, state, transition }, epoch),
        });
        await keeper.load();
      }
      const nowMs = now();
      const readings = await readSignals(deps, stepReads, nowMs);
      const outcomes = deps.reports.takeOutcomes(nowMs);
      for (const [resource, delta] of outcomes) {
        const calls = delta.succeeded + delta.failed;
        if (hasBreaker(resource) && calls > 0) {
          readings.push({
            signal: 'tool_error_rate',
            scope: resource,
            value: delta.failed / calls,
          });
        }
      }
      const changes = await keeper.tick(outcomes, nowMs);
      if (changes === undefined) return undefined;
      for (const change of changes) {
        deps.log.warn(
          { resource: change.resource, from: change.from, to: change.to, reason: change.reason },
          'circuit breaker changed',
        );
        deps.metrics.breakerTransitions.inc({
          resource: change.resource,
          from: change.from,
          to: change.to,
        });
      }
      const assessed = book.assess(readings, nowMs);
      const actions = book.actions(assessed);
      const adaptiveLimits: Record<string, number> = {};
      for (const llm of deps.reports.llmPressure(nowMs)) {
        if (llm.limit > 0) adaptiveLimits[llm.resource] = llm.limit;
      }
      const decision = composeDecision({
        epoch,
        holder: deps.holder,
        at: new Date(nowMs),
        actions,
        readings: assessed,
        breakers: keeper.views(),
        halfOpenProbes: deps.breaker.probes,
        adaptiveLimits,
        overrides: await activeOverrides(deps.db),
        retryAfterBaseMs: deps.retryAfterBaseMs,
      });
      recordMetrics(deps.metrics, decision, keeper, entered);
      return decision;
    },
  };
}

/** The reads of the step tables, each taken at its own pace. */
interface StepReads {
  readonly depths: PacedRead<QueueDepths>;
  readonly latencies: PacedRead<StepLatency[]>;
  readonly retries: PacedRead<RetryShare>;
}

/** The readings of this tick (tool error rates are added from the outcomes by the caller). */
async function readSignals(
  deps: DecisionMakerDeps,
  stepReads: StepReads,
  nowMs: number,
): Promise<Reading[]> {
  const { db, reports, metrics } = deps;
  const depths = await stepReads.depths.get();
  const latencies = await stepReads.latencies.get();
  const retries = await stepReads.retries.get();
  const connections = await databaseConnectionUsage(db);

  const loads = reports.loads(nowMs);
  metrics.queueDepth.reset();
  // Every priority of every resource with live executors reads 0 when nothing waits, so an empty
  // queue is a 0 on the dashboard rather than a missing series.
  for (const { resource } of loads) {
    for (const priority of PRIORITIES) {
      metrics.queueDepth.set({ priority: priorityLabel(priority), resource }, 0);
    }
  }
  let depth = 0;
  for (const group of depths.ready) {
    depth += group.ready;
    metrics.queueDepth.set(
      { priority: priorityLabel(group.priority), resource: group.resource },
      group.ready,
    );
  }
  const readings: Reading[] = [{ signal: 'queue_depth', scope: 'all', value: depth }];
  for (const load of loads) {
    if (load.slots > 0) {
      readings.push({
        signal: 'worker_busy_ratio',
        scope: load.resource,
        value: load.busy / load.slots,
      });
    }
  }
  for (const llm of reports.llmPressure(nowMs)) {
    // No calls means no 429s: a hold that stopped every call must be able to end.
    readings.push({
      signal: 'llm_rate_limit',
      scope: llm.resource,
      value: llm.calls > 0 ? llm.rateLimited / llm.calls : 0,
    });
  }
  readings.push({
    signal: 'db_connection_usage',
    scope: 'server',
    value: connections.max > 0 ? connections.inUse / connections.max : Number.NaN,
  });
  const urgent: Priority[] = [0, 1];
  for (const priority of urgent) {
    const latency = latencies.find((l) => l.priority === priority)?.waitP95Ms ?? null;
    const waiting = depths.ready.some((group) => group.priority === priority && group.ready > 0);
    // Nothing started while steps wait: keep the level (NaN) — a stuck queue is not relief. Nothing
    // started and nothing waiting: no pressure from this priority.
    readings.push({
      signal: 'p95_task_latency',
      scope: priorityLabel(priority),
      value: latency ?? (waiting ? Number.NaN : 0),
    });
  }
  readings.push({
    signal: 'retry_storm',
    scope: 'all',
    value: retries.started >= MIN_STARTS_FOR_RETRY_SHARE ? retries.retries / retries.started : 0,
  });
  return readings;
}

/**
 * Withdraws what only the acting leader reports (queue depths, signals, level, breaker states,
 * limits), once its tenure ended: a replica that lost the lease or was deposed would otherwise go
 * on exporting its last readings beside the new leader's, and the dashboard's `max` over replicas
 * would show them (a reject level, a backlog) until the process restarts.
 */
export function clearLeaderGauges(metrics: Metrics): void {
  metrics.queueDepth.reset();
  metrics.governorSignal.reset();
  metrics.governorLevel.reset();
  metrics.breakerState.reset();
  metrics.resourceLimit.reset();
}

function recordMetrics(
  metrics: Metrics,
  decision: GovernorDecision,
  keeper: BreakerKeeper,
  previousLevels: Map<string, string>,
): void {
  metrics.governorLevel.set(ADMISSION_LEVELS.indexOf(decision.level));
  metrics.governorSignal.reset();
  for (const reading of decision.signals ?? []) {
    metrics.governorSignal.set({ signal: reading.signal, scope: reading.scope }, reading.value);
    const key = `${reading.signal} ${reading.scope}`;
    // A trigger is the entry into a level above normal, not every tick spent there.
    if (reading.level !== 'normal' && previousLevels.get(key) !== reading.level) {
      metrics.backpressureTriggerCount.inc({ decision: reading.level, cause: reading.signal });
    }
    previousLevels.set(key, reading.level);
  }
  for (const { resource, state } of keeper.all()) {
    metrics.breakerState.set(
      { resource },
      state.status === 'closed' ? 0 : state.status === 'half_open' ? 1 : 2,
    );
  }
  metrics.resourceLimit.reset();
  for (const [resource, limit] of Object.entries(decision.limits ?? {})) {
    metrics.resourceLimit.set({ resource }, limit);
  }
}

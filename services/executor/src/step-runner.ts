/**
 * Runs one dispatched step: marks it running in Postgres (starting the task when this is its first
 * step), runs the handler with a timeout and a cancel signal while heart-beating, records the
 * outcome in Postgres, and only then acknowledges the message and wakes the scheduler.
 */
import type { JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { type Priority, type SerializedStepError, type StepOutcome } from '@sluice/core';
import { ROOT_CONTEXT, context } from '@opentelemetry/api';
import {
  encodeMessage,
  wakeDispatcherForEach,
  extractTraceContext,
  type BusCatalog,
  type StepDispatch,
} from '@sluice/bus';
import {
  appendTaskEvent,
  applyTransition,
  findStep,
  heartbeatSteps,
  latestApproval,
  lockTask,
  outputsBefore,
  releaseStep,
  recordStepOutcome,
  recordStepProgress,
  startStep,
  withDatabaseSpan,
  type Database,
  type GroupWriter,
  type OutcomeRecording,
  type OutcomeToRecord,
  type StepDispatchRef,
  type StepRecord,
  type TaskRecord,
  type UsualStart,
  type Transaction,
} from '@sluice/db';
import { StepResultError, toJson, toStepOutcome, type TaskDefinition } from '@sluice/sdk';
import type { Logger, Metrics } from '@sluice/telemetry';
import { ABORT_GRACE_MS, AbortIgnoredError, abortGrace } from './abort-grace.js';
import {
  StepAbortError,
  classifyStepError,
  stepErrorMessage,
  type AbortReason,
} from './classify-error.js';
import { retryWhileDatabaseDown, type DatabaseOutageOptions } from './database-outage.js';
import { createLlmClient, type LlmClientOptions } from './llm-client.js';
import type { LlmGate } from './llm-gate.js';
import { createProgressReporter } from './progress-reporter.js';
import { buildStepContext, type StepHistory } from './step-context.js';
import {
  recordTaskCompleted,
  recordTaskContinued,
  recordTaskStarted,
  runInStepSpan,
} from './step-span.js';
import type { TaskRegistry } from './task-registry.js';

/** What the runner needs from its executor. */
export interface StepRunnerDeps {
  readonly db: Database;
  readonly nc: NatsConnection;
  readonly catalog: BusCatalog;
  readonly registry: TaskRegistry;
  readonly llm: LlmClientOptions;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly resource: string;
  readonly heartbeatMs: number;
  readonly ackWaitMs: number;
  /** Aborts of running steps by task id, so a cancel request reaches them. */
  readonly running: RunningSteps;
  /**
   * Starts steps of usual tasks (`startUsualSteps`), several in one statement when they arrive
   * together (group start); answers undefined for an unknown task.
   */
  readonly starts: GroupWriter<StepDispatchRef, UsualStart | undefined>;
  /**
   * Writes outcomes (`recordStepOutcomes`), several in one commit when they finish together
   * (group commit); answers what it did: recorded, recorded and applied (its task completed or
   * continued), or nothing (a stale dispatch).
   */
  readonly outcomes: GroupWriter<OutcomeToRecord, OutcomeRecording>;
  /** The executor's one LLM gate (adaptive concurrency, request and token budgets). */
  readonly llmGate?: LlmGate;
  /** Whether the governor asks a priority to degrade now. */
  readonly isDegraded?: (priority: Priority) => boolean;
  /** Whether this executor's resource has an open circuit breaker now. */
  readonly isBreakerOpen?: () => boolean;
  /** Counts each outcome for the executor's report to the governor. */
  readonly onOutcome?: (outcome: StepOutcome) => void;
  /**
   * How the step's start and its outcome write ride out a Postgres outage, each on its own (the
   * message is kept alive meanwhile); absent: a failed write is thrown at once.
   */
  readonly databaseOutage?: Omit<DatabaseOutageOptions, 'keepAlive' | 'onRetry'>;
  /**
   * How long a handler may go on after its timeout or a cancel before the runner stops waiting
   * for it (abort-grace.ts); default {@link ABORT_GRACE_MS}.
   */
  readonly abortGraceMs?: number;
}

/** The abort controllers of the steps running in this process, by task. */
export class RunningSteps {
  private readonly byTask = new Map<string, Set<(reason: AbortReason) => void>>();

  add(taskId: string, abort: (reason: AbortReason) => void): () => void {
    let set = this.byTask.get(taskId);
    if (!set) this.byTask.set(taskId, (set = new Set()));
    set.add(abort);
    return () => {
      set.delete(abort);
      if (set.size === 0) this.byTask.delete(taskId);
    };
  }

  /** Aborts every running step of `taskId`; returns how many. */
  cancel(taskId: string): number {
    const set = this.byTask.get(taskId);
    for (const abort of set ?? []) abort('cancelled');
    return set?.size ?? 0;
  }
}

type Started =
  | { kind: 'run'; step: StepRecord; task: TaskRecord; history: StepHistory }
  /** Cancelled before it ran: the `cancelled` outcome is recorded. */
  | { kind: 'recorded' }
  /** Its task is being paused: the step went back to the ready queue without running. */
  | { kind: 'released' }
  /** Running on another executor that is still heart-beating. */
  | { kind: 'busy' }
  /** Finished, or dispatched again since: this message has nothing left to do. */
  | { kind: 'stale' };

/** Runs the step a dispatch message names; resolves when the message is settled. */
export function runDispatchedStep(
  deps: StepRunnerDeps,
  message: JsMsg,
  dispatch: StepDispatch,
): Promise<void> {
  // In the context of the dispatch that delivered it, so the executor's own lines about the step
  // (started, finished, failed) carry the task's trace id like the handler's.
  return context.with(extractTraceContext(message.headers, ROOT_CONTEXT), () =>
    runStep(deps, message, dispatch),
  );
}

async function runStep(
  deps: StepRunnerDeps,
  message: JsMsg,
  dispatch: StepDispatch,
): Promise<void> {
  const ref: StepDispatchRef = {
    taskId: dispatch.task_id,
    seq: dispatch.step_seq,
    dispatch: dispatch.dispatch,
    publishSeq: message.seq,
  };
  const log = deps.log.child({ task_id: ref.taskId, step_seq: ref.seq, dispatch: ref.dispatch });
  // Each write is tried again on its own while Postgres is unavailable: a retry of the whole run
  // after the handler ran would find the step running under this very dispatch ('busy'), hand the
  // message back and drop the outcome, and the step would run again once its heartbeat went stale.
  const whileDatabaseDown = <T>(write: () => Promise<T>, onRetry?: () => void): Promise<T> =>
    deps.databaseOutage
      ? retryWhileDatabaseDown(write, {
          ...deps.databaseOutage,
          keepAlive: () => message.working(),
          onRetry: (error, attempt) => {
            onRetry?.();
            log.warn(
              { err: error, attempt },
              'database unavailable; holding the step and trying again',
            );
          },
        })
      : write();
  // After a failed attempt, the step found running under this dispatch may be this run's own
  // start, committed with its answer lost (see recordStart).
  let startRetried = false;
  const started = await whileDatabaseDown(
    () => start(deps, ref, startRetried),
    () => (startRetried = true),
  );
  if (started.kind === 'busy') {
    // A redelivery while its executor is alive: look again after an ack wait, in case it dies.
    message.nak(deps.ackWaitMs);
    return;
  }
  if (started.kind !== 'run') {
    message.ack(); // not confirmed: see below
    if (started.kind === 'recorded' || started.kind === 'released') wakeScheduler(deps, ref);
    log.debug({ outcome: started.kind }, 'step not run');
    return;
  }
  const { step, task, history } = started;
  const { outcome, stillRunning } = await execute(deps, message, ref, { step, task, history }, log);
  // With the outcomes of other steps that finish meanwhile, in one statement and one commit (the
  // span covers the wait for that write).
  let writeRetried = false;
  const recording = await whileDatabaseDown(
    () => withDatabaseSpan(deps.db, RECORD_OUTCOME, () => deps.outcomes.write({ ref, outcome })),
    () => (writeRetried = true),
  );
  // A usual outcome was applied by the write itself: the task's transition goes on its trace
  // here, as the scheduler records the transitions it applies (the dispatch's context is active
  // for the whole run, see runDispatchedStep).
  if (recording.kind === 'completed') recordTaskCompleted(task, step, context.active());
  if (recording.kind === 'continued') recordTaskContinued(task, step, context.active());
  const recorded = recording.kind !== 'stale';
  deps.metrics.stepsFinished.inc({ resource: deps.resource, outcome: outcome.type });
  deps.onOutcome?.(outcome);
  // Not a confirmed ack (`ackAck`, a round trip to the server): what the step did is in Postgres
  // already, so an ack that gets lost only brings the message back, and its start finds the
  // dispatch finished ('stale') and acknowledges it then.
  message.ack();
  // Steps are ready (the next, the branches, the join): the dispatcher's wake-up for each
  // resource and priority, as for a created task's first step.
  if (recording.kind === 'continued') {
    wakeDispatcherForEach(deps.nc, deps.catalog, 'step.continued', recording.added);
  }
  if (recorded) {
    wakeScheduler(deps, ref, recording.kind !== 'recorded');
  } else if (writeRetried) {
    // A failed attempt may have committed (its COMMIT's answer lost with the connection), so
    // 'stale' may be this very outcome, recorded for the outcome pass or applied with steps added:
    // what it did is unknown here, so both the pass and the dispatcher look now rather than at
    // their next poll (at worst each finds nothing). An outcome the write applied is then not
    // counted in the resource's retry budget: rare, and the budget is an estimate.
    wakeScheduler(deps, ref);
    wakeDispatcher(deps);
  }
  log.info({ step: step.name, outcome: outcome.type, recording: recording.kind }, 'step finished');
  if (stillRunning) {
    // The step is over, but its handler goes on (it ignored its abort): its executor slot stays
    // taken until it returns, so the resource's concurrency limit still counts what it does.
    log.warn(
      { step: step.name },
      "the step's handler still runs after its abort; its slot stays taken until it returns",
    );
    await stillRunning;
    log.info({ step: step.name }, "the step's abandoned handler returned; its slot is free");
  }
}

/**
 * The database spans of a step's start and of its outcome, in the dispatch's context (so in the
 * task's trace, next to the step span). The start's summary names what its usual statement does:
 * lock the task, start the step, record the start on the task and in its history (and the
 * relay's outbox), read what the step sees.
 */
const START_STEP = {
  summary:
    'SELECT tasks UPDATE task_steps UPDATE tasks INSERT task_events INSERT task_event_outbox ' +
    'SELECT task_steps SELECT task_events',
};
/**
 * The outcome write's summary: lock the tasks, record the steps' outcomes, add the steps the usual
 * outcomes start, apply their transitions, append the events (and their ids to the relay's outbox).
 */
const RECORD_OUTCOME = {
  summary:
    'SELECT tasks UPDATE task_steps INSERT task_steps UPDATE tasks INSERT task_events ' +
    'INSERT task_event_outbox',
};

/** `retried`: an earlier attempt of this start failed, and may have committed (see recordStart). */
function start(deps: StepRunnerDeps, ref: StepDispatchRef, retried: boolean): Promise<Started> {
  return withDatabaseSpan(deps.db, START_STEP, () => startTransaction(deps, ref, retried));
}

async function startTransaction(
  deps: StepRunnerDeps,
  ref: StepDispatchRef,
  retried: boolean,
): Promise<Started> {
  if (deps.isBreakerOpen?.() !== true) {
    // The usual case in one statement that commits on its own (with the starts of the steps that
    // arrive meanwhile): the task's lock, the step's start, the task's `start` (or a
    // `step_started` fact) and what the step sees. A task that needs a decision (cancel, pause,
    // approval pending, not startable) or a dispatch that may not start is left unchanged, and
    // the careful path below decides.
    const usual = await deps.starts.write(ref);
    if (!usual) throw new Error(`step of unknown task ${ref.taskId}`);
    if (usual.started) {
      const { task, step, outputs, approval } = usual;
      return { kind: 'run', step, task, history: { outputs, approval } };
    }
  }
  return deps.db.transaction(async (tx): Promise<Started> => {
    // The task first (the lock order of every writer: task row, then its step rows).
    const task = await lockTask(tx, ref.taskId);
    if (!task) throw new Error(`step of unknown task ${ref.taskId}`);
    if (!mayStartSteps(task)) {
      // A pause lets running steps finish but starts no new one: back to the ready queue, where
      // it waits until the task is resumed (the scheduler pauses a running task once nothing
      // runs). The same for a task that was paused while this step was on its way.
      return (await releaseStep(tx, ref)) ? { kind: 'released' } : { kind: 'stale' };
    }
    if (!task.cancelRequested && deps.isBreakerOpen?.() === true) {
      // Dispatched before the breaker opened: it waits in the ready queue (without spending an
      // attempt) until the breaker lets calls through again, rather than calling a failing tool.
      return (await releaseStep(tx, ref)) ? { kind: 'released' } : { kind: 'stale' };
    }
    const step = await startStep(tx, ref, deps.ackWaitMs);
    return recordStart(tx, ref, task, step, () => readHistory(tx, ref), retried);
  });
}

/**
 * What the step sees of its task (earlier outputs, the latest approval), read under the task's
 * lock in the transaction that starts it, so the handler's context is built without a query.
 */
async function readHistory(tx: Transaction, ref: StepDispatchRef): Promise<StepHistory> {
  const [outputs, approval] = await Promise.all([
    outputsBefore(tx, ref.taskId, ref.seq),
    latestApproval(tx, ref.taskId),
  ]);
  return { outputs, approval };
}

/**
 * Whether a dispatched step of this task may start: not while a pause is requested or the task is
 * neither queued nor running — unless a cancel is requested, which the start records at once.
 */
function mayStartSteps(task: TaskRecord): boolean {
  const startable = task.status === 'queued' || task.status === 'running';
  return task.cancelRequested || (!task.pauseRequested && startable);
}

/**
 * After the step's start (`step`, or undefined when it was not this dispatch's to start): what the
 * start means for the task, in the same transaction; `history` gives what a step that runs sees.
 *
 * `retried`: an earlier attempt of this start failed after it may have reached Postgres, so a step
 * running under this dispatch is taken to be its own start, committed with its answer lost (the
 * message is held meanwhile, so no other delivery of it runs), and is run: handed back as 'busy',
 * it ran only once its heartbeat went stale, an ack wait later, with a second attempt counted.
 */
async function recordStart(
  tx: Transaction,
  ref: StepDispatchRef,
  task: TaskRecord,
  step: StepRecord | undefined,
  history: () => Promise<StepHistory>,
  retried = false,
): Promise<Started> {
  if (!step) {
    const current = await findStep(tx, ref.taskId, ref.seq);
    const busy = current?.status === 'running' && current.dispatchCount === ref.dispatch;
    if (!busy || !retried) return { kind: busy ? 'busy' : 'stale' };
    if (task.cancelRequested || task.status === 'cancelled') {
      await recordStepOutcome(tx, ref, { type: 'cancelled' });
      return { kind: 'recorded' };
    }
    return { kind: 'run', step: current, task, history: await history() };
  }
  if (task.cancelRequested || task.status === 'cancelled') {
    await recordStepOutcome(tx, ref, { type: 'cancelled' });
    return { kind: 'recorded' };
  }
  if (task.status === 'queued') {
    const result = await applyTransition(tx, {
      taskId: task.id,
      event: { type: 'start' },
      step: step.name,
      patch: { currentStep: step.name },
      data: { seq: step.seq, attempt: step.attempts },
      locked: task, // read for update above; starting the step did not change the task row
    });
    if (!result.ok) throw new Error(`cannot start task ${task.id}: ${result.reason}`);
  } else {
    await appendTaskEvent(tx, {
      taskId: task.id,
      type: 'step_started',
      step: step.name,
      data: { seq: step.seq, attempt: step.attempts },
    });
  }
  return { kind: 'run', step, task, history: await history() };
}

/** What running a step's handler came to. */
interface Executed {
  readonly outcome: StepOutcome;
  /**
   * A handler given up on after its abort's grace (abort-grace.ts) that has not returned: settles
   * (never rejects) when it does.
   */
  readonly stillRunning?: Promise<void>;
}

async function execute(
  deps: StepRunnerDeps,
  message: JsMsg,
  ref: StepDispatchRef,
  { step, task, history }: { step: StepRecord; task: TaskRecord; history: StepHistory },
  log: Logger,
): Promise<Executed> {
  const definition = deps.registry.find(task.type, task.typeVersion);
  const stepDefinition = definition && deps.registry.step(definition, step.name);
  if (!definition || !stepDefinition) {
    // Retryable: another executor of the resource may know it (in a rolling deployment, tasks pin
    // the version the newest executor registered while older ones still take their steps).
    return {
      outcome: {
        type: 'failed',
        error: {
          errorClass: 'unknown',
          message: `this executor has no definition of ${task.type} v${task.typeVersion} step ${step.name}`,
          retryable: true,
        },
      },
    };
  }
  const controller = new AbortController();
  let abortReason: AbortReason | undefined;
  const abort = (reason: AbortReason) => {
    abortReason ??= reason;
    controller.abort(new StepAbortError(reason));
  };
  const unregister = deps.running.add(ref.taskId, abort);
  const timeout = setTimeout(() => abort('timeout'), stepDefinition.timeoutMs ?? 60_000);
  const grace = abortGrace(controller.signal, deps.abortGraceMs ?? ABORT_GRACE_MS, () =>
    abortReason === 'cancelled' ? 'cancel' : 'timeout',
  );
  const heartbeat = startHeartbeat(deps, message, ref, log);
  const progress = createProgressReporter({
    write: (value) =>
      recordStepProgress(deps.db, {
        taskId: task.id,
        step: step.name,
        seq: step.seq,
        fraction: value.fraction,
        message: value.message,
      }),
    log,
  });
  let handlerRun: Promise<unknown> | undefined;
  try {
    const context = buildStepContext({
      task,
      step,
      history,
      definition,
      stepDefinition,
      signal: controller.signal,
      log,
      llm: createLlmClient(deps.llm, controller.signal, deps.llmGate),
      progress,
      degraded: deps.isDegraded?.(task.priority as Priority) ?? false,
    });
    // The span of the scheduler's dispatch (in the message's headers) is the step's parent.
    const result: unknown = await runInStepSpan(
      task,
      step,
      (span) => {
        // A task still queued when this step was claimed was started by it (see `start`).
        if (task.status === 'queued') recordTaskStarted(span, step);
        // A handler that ignores its signal is given up on once the grace after the abort is over.
        handlerRun = Promise.resolve(stepDefinition.run({ ...context, span }));
        return Promise.race([handlerRun, grace.expired]);
      },
      extractTraceContext(message.headers, ROOT_CONTEXT),
    );
    // The last progress reported is stored before the outcome (and its event) is.
    await progress.close();
    if (abortReason === 'cancelled') return { outcome: { type: 'cancelled' } };
    return { outcome: outcomeOf(result, definition, step, log) };
  } catch (error) {
    await progress.close();
    const stillRunning =
      error instanceof AbortIgnoredError && handlerRun
        ? handlerRun.then(
            () => undefined,
            () => undefined,
          )
        : undefined;
    if (abortReason === 'cancelled') return { outcome: { type: 'cancelled' }, stillRunning };
    const stepError = classifyStepError(error, abortReason);
    logStepFailure(log, error, stepError);
    return { outcome: { type: 'failed', error: stepError }, stillRunning };
  } finally {
    clearTimeout(timeout);
    grace.stop();
    heartbeat.stop();
    unregister();
    // What the handler left running (a call it did not await: a race's loser, the rest of a
    // Promise.all that rejected) stops with the step: an LLM call has no deadline but the step's
    // signal, and would hold its gate permit for as long as the provider takes. A cancel to the
    // gate: nobody wants the answer.
    if (!controller.signal.aborted) {
      controller.abort(new StepAbortError('cancelled', 'the step is over'));
    }
  }
}

/**
 * Logs a handler's failure with what it threw. pino's error serializer reads the value's fields,
 * and a getter that throws there would fail the run in place of the step (see classifyStepError):
 * such a value is logged by its classified message instead.
 */
function logStepFailure(log: Logger, error: unknown, stepError: SerializedStepError): void {
  try {
    log.warn({ err: error, error_class: stepError.errorClass }, 'step failed');
  } catch {
    log.warn(
      { err_message: stepError.message, error_class: stepError.errorClass },
      'step failed (what it threw could not be logged)',
    );
  }
}

/**
 * The outcome of what a handler returned. A result Sluice cannot record (unknown step, input or
 * output against its schema, not JSON, out of bounds) is a bug of the task type: recorded as a
 * `schema_validation` failure, which is not retried.
 */
function outcomeOf(
  result: unknown,
  definition: TaskDefinition,
  step: StepRecord,
  log: Logger,
): StepOutcome {
  try {
    return toStepOutcome(result, {
      definition,
      step: step.name,
      inBranch: step.fanOutOf !== null,
    });
  } catch (error) {
    if (!(error instanceof StepResultError)) throw error;
    log.warn({ err: error, error_class: error.errorClass }, 'step returned an invalid result');
    // What the handler returned goes with the failure, for the step's repair step to fix.
    const returned = toJson(result);
    return {
      type: 'failed',
      error: {
        errorClass: error.errorClass,
        message: stepErrorMessage(error.message),
        retryable: false,
      },
      result: returned.ok ? returned.value : null,
    };
  }
}

/**
 * Keeps a running step visibly alive: `working()` on the message resets JetStream's ack timer, and
 * a coarse heartbeat in Postgres tells the reconciler the step is really running.
 */
function startHeartbeat(
  deps: StepRunnerDeps,
  message: JsMsg,
  ref: StepDispatchRef,
  log: Logger,
): { stop(): void } {
  const everyMs = Math.max(100, Math.min(deps.heartbeatMs, Math.floor(deps.ackWaitMs / 3)));
  let lastDbBeat = Date.now();
  const timer = setInterval(() => {
    message.working();
    if (Date.now() - lastDbBeat < deps.heartbeatMs) return;
    lastDbBeat = Date.now();
    heartbeatSteps(deps.db, [ref]).catch((error: unknown) =>
      log.warn({ err: error }, 'could not record a step heartbeat'),
    );
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}

/** Tells the dispatcher steps may be ready, naming none (so it looks whatever their resource). */
function wakeDispatcher(deps: StepRunnerDeps): void {
  deps.nc.publish(
    deps.catalog.subjects.wake('dispatch'),
    encodeMessage({ type: 'wake', reason: 'step.outcome_uncertain' }),
  );
}

/**
 * Tells the scheduler an outcome is recorded (a wake-up; it also polls, so a loss only delays).
 * `applied`: the write applied it too (a usual outcome: see recordStepOutcomes), so the outcome pass
 * has nothing to do for it; the scheduler still counts the attempt in the resource's retry budget.
 */
function wakeScheduler(deps: StepRunnerDeps, ref: StepDispatchRef, applied = false): void {
  deps.nc.publish(
    deps.catalog.subjects.stepResult,
    encodeMessage({
      type: 'step.result',
      task_id: ref.taskId,
      step_seq: ref.seq,
      ...(applied ? { applied: { resource: deps.resource } } : {}),
    }),
  );
}

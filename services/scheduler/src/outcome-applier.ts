/**
 * Turns recorded step outcomes into the task's next transition, in batches of one transaction:
 * - `next` / `fanOut` start the following step(s) (`continue`);
 * - `complete` of a fan-out branch finishes that branch, and the last one starts the join;
 *   `complete` of any other step completes the task;
 * - `awaitApproval` makes the task wait for a person, with a durable timeout timer;
 * - `failed` runs the step again after its backoff when its class and attempts allow (the retry
 *   budget may push it later), goes to the step's repair step after a `schema_validation` failure
 *   when it declares one, and otherwise fails the task (with a dead letter when attempts ran out or
 *   another path wrote one) and aborts its other steps;
 * - while a cancel is requested, outcomes start nothing: the settler ends the task once nothing runs;
 *   what they asked for is kept for a retry (steps added cancelled, an approval kept on the task).
 *
 * Each outcome is applied in a `sluice.scheduler.apply_outcome` span of its task's trace, with its
 * transitions and scheduled retries as span events (task-trace.ts).
 */
import {
  assertNever,
  continuationOf,
  decideRepair,
  decideRetry,
  isFinalStatus,
  isTaskStatus,
  repairInputOf,
  type ErrorClass,
  type Json,
  type SerializedStepError,
} from '@sluice/core';
import {
  TimerKind,
  addTimer,
  appendTaskEvent,
  applyLockedTransitions,
  applyTransition,
  armApprovalTimer,
  findTaskType,
  hasOtherActiveSteps,
  insertDeadLetter,
  keepApprovalForRetry,
  scheduleStepRetry,
  cancelWaitingSteps,
  failStepWhoseContinuationFailed,
  joinIfComplete,
  lockTask,
  hasTasksToSettle,
  lockUnappliedOutcomes,
  markOutcomesApplied,
  openDeadLetterOfStep,
  repairHistoryOf,
  rerunUnfinishedSteps,
  startContinuation,
  type Database,
  type DeadLetterReason,
  type ManifestStep,
  type PendingApproval,
  type TaskRecord,
  type Transaction,
  type TransitionRequest,
  type TransitionResult,
  type UnappliedOutcome,
} from '@sluice/db';
import {
  ATTR_ERROR_TYPE,
  ATTR_STEP,
  ATTR_STEP_ATTEMPT,
  type Attributes,
  type Logger,
  type Metrics,
} from '@sluice/telemetry';
import { tentativeLedger, type RetryBudgetLedger } from './retry-budget-ledger.js';
import {
  ATTR_OUTCOME_TYPE,
  SPAN_APPLY_OUTCOME,
  inTaskTrace,
  recordRetryScheduled,
  recordTransition,
} from './task-trace.js';

/** What the applier needs. */
export interface OutcomeApplierDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly batchSize: number;
  /** Called after a commit that added ready steps, so the dispatcher runs at once. */
  readonly onStepsReady: () => void;
  /** Called after a commit that failed tasks, so their running steps are aborted. */
  readonly abortRunningSteps: (taskIds: readonly string[]) => void;
  /** The retry budget of this replica; without one, retries are due when their backoff says. */
  readonly retryBudget?: RetryBudgetLedger;
  /**
   * Told, after a pass that applied outcomes, whether tasks wait to be settled: asked in its
   * transaction with its writes, so the settler need not ask again (`settleBatch`).
   */
  readonly onSettleChecked?: (due: boolean) => void;
  /** Called after a commit that armed timers (a task's retry backoff, an approval's deadline). */
  readonly onTimersArmed?: () => void;
  /**
   * Called after a commit that scheduled a step's retry in a task that goes on running (a fan-out
   * branch beside others in flight): the step falls due in `ms`, which no timer and no wake-up
   * message announces, so that the dispatcher looks then rather than at its next poll.
   */
  readonly onStepsDueIn?: (ms: number) => void;
}

/** What applying an outcome reads besides the transaction. */
type ApplyDeps = Pick<OutcomeApplierDeps, 'log' | 'retryBudget'>;

/** What applying one outcome did, for what follows the commit. */
interface Applied {
  readonly stepsAdded: boolean;
  readonly abortTask: boolean;
  /** The reason of a dead letter written, counted once the transaction commits. */
  readonly deadLetter?: DeadLetterReason;
  /** The class of the error a retry was scheduled for, counted once the transaction commits. */
  readonly retried?: ErrorClass;
  /** The resource whose retry budget pushed a retry later. */
  readonly overBudget?: string;
  /** A timer was armed (a task's retry backoff, an approval's deadline). */
  readonly timerArmed?: boolean;
  /** A step's retry falls due then, in a task that goes on running (no timer for it). */
  readonly stepDueAt?: Date;
}

const NOTHING: Applied = { stepsAdded: false, abortTask: false };

/**
 * Applies one batch of outcomes in one transaction; true when the batch was full. Three round
 * trips: `begin` with the locks; the completions, the marks and the settle question; `commit`.
 * No `exists` check first: a pass is woken by a recorded outcome, so it nearly always finds one
 * (an empty pass costs the `commit`).
 */
export async function applyOutcomeBatch(deps: OutcomeApplierDeps): Promise<boolean> {
  // What the pass counts in the retry budget (in memory) stands only if its transaction commits:
  // a pass that rolls back is applied again, and would count its attempts and retries twice.
  const budget = deps.retryBudget && tentativeLedger(deps.retryBudget);
  const applyDeps: ApplyDeps = { log: deps.log, retryBudget: budget?.ledger };
  const transaction = deps.db.transaction(async (tx) => {
    // The outcomes and every task of the batch, locked at once.
    const { outcomes, tasks: locked } = await lockUnappliedOutcomes(tx, deps.batchSize);
    if (outcomes.length === 0) return undefined;
    const outcomesOf = countBy(outcomes, (o) => o.taskId);
    const completions: Completion[] = [];
    let added = false;
    const abort: string[] = [];
    const counted: Applied[] = [];
    for (const outcome of outcomes) {
      // Every finished attempt counts towards its resource's retry budget (a cancel is not one).
      if (outcome.outcome.type !== 'cancelled') {
        applyDeps.retryBudget?.recordAttempt(outcome.resource);
      }
      const alone = outcomesOf.get(outcome.taskId) === 1;
      const task = alone ? locked.get(outcome.taskId) : await lockTask(tx, outcome.taskId);
      if (!task)
        throw new Error(`outcome of step ${outcome.stepId} names unknown task ${outcome.taskId}`);
      if (alone && isTaskCompletion(task, outcome)) {
        completions.push({ task, recorded: outcome }); // all together below, in one statement
        continue;
      }
      const applied = await applyTraced(tx, task, outcome, applyDeps);
      added ||= applied.stepsAdded;
      if (applied.abortTask) abort.push(outcome.taskId);
      counted.push(applied);
    }
    // Sent together: one round trip for the batch's marks, whether tasks now wait to be settled
    // (this batch's outcomes counted as applied, whichever runs first) and its completions. The
    // completions last: the driver sends its buffer at once when a statement fills a kilobyte
    // (theirs often does), so the small ones queued before go in the same write.
    const stepIds = outcomes.map((o) => o.stepId);
    const [, settleDue] = await Promise.all([
      markOutcomesApplied(tx, stepIds),
      hasTasksToSettle(tx, stepIds),
      completeTasks(tx, completions, deps.log),
    ]);
    return {
      count: outcomes.length,
      stepsAdded: added,
      aborted: abort,
      results: counted,
      settleDue,
    };
  });
  const pass = await transaction.catch((error: unknown) => {
    budget?.rollBack();
    throw error;
  });
  if (pass === undefined) return false;
  const { count, stepsAdded, aborted, results, settleDue } = pass;
  deps.onSettleChecked?.(settleDue);
  // Counted once the transaction committed.
  for (const applied of results) {
    if (applied.deadLetter) deps.metrics.deadLetterCount.inc({ reason: applied.deadLetter });
    if (applied.retried) deps.metrics.retryCount.inc({ error_class: applied.retried });
    if (applied.overBudget) deps.metrics.retryBudgetExhausted.inc({ resource: applied.overBudget });
  }
  if (stepsAdded) deps.onStepsReady();
  if (results.some((applied) => applied.timerArmed)) deps.onTimersArmed?.();
  const dueTimes = results.flatMap((applied) => applied.stepDueAt?.getTime() ?? []);
  if (dueTimes.length > 0) deps.onStepsDueIn?.(Math.min(...dueTimes) - Date.now());
  if (aborted.length > 0) deps.abortRunningSteps(aborted);
  return count === deps.batchSize;
}

/** Applies one outcome in a span of its task's trace; `task` is its row, locked. */
function applyTraced(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  deps: ApplyDeps,
): Promise<Applied> {
  return inTaskTrace(task, SPAN_APPLY_OUTCOME, spanAttributes(recorded), () =>
    applyOne(tx, task, recorded, deps),
  );
}

function spanAttributes(recorded: UnappliedOutcome): Attributes {
  const { outcome } = recorded;
  return {
    [ATTR_STEP]: recorded.name,
    [ATTR_STEP_ATTEMPT]: recorded.attempts,
    [ATTR_OUTCOME_TYPE]: outcome.type,
    ...(outcome.type === 'failed' ? { [ATTR_ERROR_TYPE]: outcome.error.errorClass } : {}),
  };
}

/** A step outside any branch succeeded and its task runs: the task completes. */
interface Completion {
  readonly task: TaskRecord;
  readonly recorded: UnappliedOutcome;
}

/**
 * Whether the outcome completes its running task (the most common outcome of all: the last step
 * of a task succeeded). Such outcomes of tasks with no other outcome in the batch are applied
 * together by {@link completeTasks}, in one statement; {@link applyOne} does the same for one.
 */
function isTaskCompletion(task: TaskRecord, recorded: UnappliedOutcome): boolean {
  return (
    task.status === 'running' && recorded.outcome.type === 'complete' && recorded.fanOutOf === null
  );
}

/** The transition that completes a task with its last step's output. */
function completion(task: TaskRecord, recorded: UnappliedOutcome): TransitionRequest {
  const { outcome } = recorded;
  if (outcome.type !== 'complete') throw new Error(`outcome ${outcome.type} completes nothing`);
  return {
    taskId: task.id,
    step: recorded.name,
    event: { type: 'complete' },
    patch: { currentStep: null, output: outcome.output, error: null },
    locked: task, // read for update in this transaction, and nothing changed it since
  };
}

/**
 * Completes tasks in one statement (applyLockedTransitions), each in a span of its own trace with
 * the transition recorded on it, as {@link applyTraced} would have.
 */
async function completeTasks(
  tx: Transaction,
  completions: readonly Completion[],
  log: Logger,
): Promise<void> {
  if (completions.length === 0) return;
  const requests = completions.map(({ task, recorded }) => completion(task, recorded));
  const results = await applyLockedTransitions(tx, requests);
  for (const [index, { task, recorded }] of completions.entries()) {
    const request = requests[index] as TransitionRequest;
    const result = results[index] as TransitionResult;
    await inTaskTrace(task, SPAN_APPLY_OUTCOME, spanAttributes(recorded), () => {
      noteTransition(log, request, result);
      return Promise.resolve();
    });
  }
}

/** How many items of `items` share each key. */
function countBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, number> {
  const counts = new Map<K, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

async function applyOne(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  deps: ApplyDeps,
): Promise<Applied> {
  const { log } = deps;
  const { outcome } = recorded;
  const isBranch = recorded.fanOutOf !== null;
  if (isStrayStop(task, recorded)) {
    // A step of an earlier attempt, still running when a retry started this one (a sibling branch
    // had failed the task), stopped by its abort or failed on its own: the retry could not run it
    // again then, and nothing else would (a fan-out would wait for its join for ever); nor may a
    // failure of the attempt the retry ended fail the new one. It runs again now.
    const rerun = await rerunUnfinishedSteps(tx, task, [recorded.stepId]);
    return { stepsAdded: rerun.length > 0, abortTask: false };
  }
  if (task.status !== 'running') {
    if (outcome.type === 'next' && task.status !== 'succeeded') {
      return continueStoppedTask(tx, task, recorded, outcome, log);
    }
    // The task moved on while the step ran (a sibling failed it, or it was cancelled while
    // queued): the outcome stays on the step row for the record; the task's state stands.
    log.info(
      { task_id: task.id, step: recorded.name, outcome: outcome.type, status: task.status },
      'outcome of a settled task',
    );
    return NOTHING;
  }
  const completesTask = outcome.type === 'complete' && !isBranch;
  if (task.cancelRequested && !completesTask) return keepForRetry(tx, task, recorded, deps);
  return applyToRunning(tx, task, recorded, deps);
}

/**
 * A step that asked for its next step (a fan-out branch going on) when its task was no longer
 * running: a sibling had failed the task, which a retry may have queued again since. The step
 * succeeded, so no retry runs it again; without its next step its branch would never complete and
 * the fan-out never join. The next step is added in the task's current attempt: ready when the
 * task is to run again (it runs with the task), cancelled at once when the task is final (a retry
 * runs it). No transition: the task's state stands.
 */
async function continueStoppedTask(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  outcome: Extract<UnappliedOutcome['outcome'], { type: 'next' }>,
  log: Logger,
): Promise<Applied> {
  const started = await startContinuation(
    tx,
    task,
    { type: 'next', step: outcome.step, input: outcome.input },
    { seq: recorded.seq, fanOutOf: recorded.fanOutOf, branchIndex: recorded.branchIndex },
  );
  const final = isTaskStatus(task.status) && isFinalStatus(task.status);
  if (!started.ok) {
    log.warn(
      { task_id: task.id, step: recorded.name, status: task.status, reason: started.reason },
      'next step of a task no longer running not started',
    );
    // The step fails instead, so that it runs again: at the final task's retry, or now in the
    // attempt a retry started (where its failure, once it asks again, fails the task).
    await failStepWhoseContinuationFailed(tx, task.id, recorded.seq, schemaError(started.reason));
    if (final) return NOTHING;
    const rerun = await rerunUnfinishedSteps(tx, task, [recorded.stepId]);
    return { stepsAdded: rerun.length > 0, abortTask: false };
  }
  // A final task has no other waiting steps (its end cancelled them): only the ones added here.
  if (final) await cancelWaitingSteps(tx, task.id);
  return { stepsAdded: !final, abortTask: false };
}

/**
 * An outcome of a task whose cancel was requested while its step ran starts nothing: the settler
 * ends the task once nothing of it runs. What the outcome asked for is kept for a retry, which runs
 * the task's failed and cancelled steps again but never a succeeded one (so the step that asked is
 * not asked again): the steps a continuation adds (a next step, branches, a join) are added and
 * cancelled at once, as a cancel a moment later would have found them, and an approval asked for
 * stays on the task, which a retry asks again. A failed step needs nothing: a retry runs it again.
 */
async function keepForRetry(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  deps: ApplyDeps,
): Promise<Applied> {
  const { outcome } = recorded;
  switch (outcome.type) {
    case 'next':
    case 'fanOut':
    case 'complete': {
      const applied = await applyToRunning(tx, task, recorded, deps);
      await cancelWaitingSteps(tx, task.id);
      return { ...applied, stepsAdded: false };
    }
    case 'awaitApproval':
      // A branch may not wait for an approval: that fails the task, cancel or not.
      if (recorded.fanOutOf !== null) return applyToRunning(tx, task, recorded, deps);
      await keepApprovalForRetry(tx, task.id, pendingApprovalOf(recorded, outcome));
      return NOTHING;
    default:
      return NOTHING;
  }
}

/** Applies the outcome of a step of a running task (`task`, locked) by what it asks for. */
async function applyToRunning(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  deps: ApplyDeps,
): Promise<Applied> {
  const { log } = deps;
  const { outcome } = recorded;
  const isBranch = recorded.fanOutOf !== null;
  const base = { taskId: task.id, step: recorded.name };
  switch (outcome.type) {
    case 'cancelled':
      return NOTHING;
    case 'failed':
      return retryOrFail(tx, task, recorded, outcome, deps);
    case 'complete': {
      if (!isBranch) {
        await transition(tx, log, completion(task, recorded));
        return NOTHING;
      }
      const join = await joinIfComplete(tx, task, recorded.fanOutOf);
      await transition(tx, log, {
        ...base,
        event: { type: 'continue' },
        data: { branch: recorded.branchIndex, ...(join ? { join: join.name } : {}) },
        ...(join ? { patch: { currentStep: join.name } } : {}),
      });
      return { stepsAdded: join !== undefined, abortTask: false };
    }
    case 'next':
    case 'fanOut': {
      const continuation = continuationOf(outcome);
      if (!continuation) throw new Error(`outcome ${outcome.type} has no continuation`);
      const started = await startContinuation(tx, task, continuation, {
        seq: recorded.seq,
        fanOutOf: recorded.fanOutOf,
        branchIndex: recorded.branchIndex,
      });
      if (!started.ok) return failContinuation(tx, task, recorded, started.reason, log);
      await transition(tx, log, {
        ...base,
        event: { type: 'continue' },
        data: { next: started.steps },
        patch: { currentStep: started.label },
      });
      return { stepsAdded: true, abortTask: false };
    }
    case 'awaitApproval': {
      if (isBranch) {
        return failContinuation(
          tx,
          task,
          recorded,
          'a fan-out branch cannot wait for an approval',
          log,
        );
      }
      const approval = pendingApprovalOf(recorded, outcome);
      if (task.pauseRequested) {
        // The step ended while a pause was requested: the task pauses, its approval pending; the
        // deadline starts when a resume makes it wait for the approval again.
        await transition(tx, log, {
          ...base,
          event: { type: 'pause_completed', approvalPending: true },
          data: { prompt: outcome.prompt },
          patch: { approval },
        });
        return NOTHING;
      }
      await transition(tx, log, {
        ...base,
        event: { type: 'await_approval' },
        data: {
          prompt: outcome.prompt,
          deadline: approval.deadline,
          on_timeout: outcome.onTimeout,
        },
        patch: { approval },
      });
      await armApprovalTimer(tx, task.id, approval);
      return { ...NOTHING, timerArmed: true };
    }
    default:
      return assertNever(outcome);
  }
}

/** The approval an `awaitApproval` outcome asks for, its deadline counted from now. */
function pendingApprovalOf(
  recorded: UnappliedOutcome,
  outcome: Extract<UnappliedOutcome['outcome'], { type: 'awaitApproval' }>,
): PendingApproval {
  return {
    prompt: outcome.prompt,
    step: recorded.name,
    timeoutMs: outcome.timeoutMs,
    onTimeout: outcome.onTimeout,
    deadline: new Date(Date.now() + outcome.timeoutMs).toISOString(),
    then: outcome.then,
    originSeq: recorded.seq,
  };
}

/**
 * Whether a step that stopped (cancelled, or failed) belongs to an attempt before its task's
 * current one, which goes on (not finished, no cancel requested): the step must run again in the
 * current attempt. A finished task's next retry runs the step again itself.
 */
function isStrayStop(task: TaskRecord, recorded: UnappliedOutcome): boolean {
  return (
    (recorded.outcome.type === 'cancelled' || recorded.outcome.type === 'failed') &&
    recorded.taskAttempt < task.attempt &&
    !task.cancelRequested &&
    !(isTaskStatus(task.status) && isFinalStatus(task.status))
  );
}

/**
 * A failed step runs again after its backoff when its class and attempts allow (decideRetry in
 * core); the wait is the step's due time in the ready queue, pushed later when the resource's retry
 * budget is used up (never dropped). A task with nothing else to do shows `failed_retryable` until a
 * durable timer makes it `queued` again; a task with other steps in flight, or a pause requested,
 * stays `running` (the settler then pauses it, the retry waiting for a resume).
 * A `schema_validation` failure goes to the step's repair step when it declares one. Otherwise the
 * task fails for good: reason `dead_letter` when its attempts ran out or another path (the advisory
 * worker, the reconciler's dispatch cap) wrote the step's dead letter, else `not_retryable`.
 */
async function retryOrFail(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  outcome: Extract<UnappliedOutcome['outcome'], { type: 'failed' }>,
  deps: ApplyDeps,
): Promise<Applied> {
  const { log } = deps;
  const { error } = outcome;
  const manifest = await findTaskType(tx, task.type, task.typeVersion);
  const declared = manifest?.steps.find((step) => step.name === recorded.name);
  const maxAttempts = declared?.maxAttempts ?? 1;
  if (error.errorClass === 'schema_validation' && declared?.repairStep !== undefined) {
    return repairOrFail(tx, task, recorded, outcome, declared, deps);
  }
  const decision = decideRetry({
    error,
    attempts: recorded.attempts,
    maxAttempts,
    random: Math.random(),
    ...(declared?.backoff ? { backoff: declared.backoff } : {}),
  });
  if (!decision.retry) {
    if (decision.reason === 'attempts_exhausted') return deadLetter(tx, task, recorded, error, log);
    const letter = await openDeadLetterOfStep(tx, task.id, recorded.seq);
    return fail(tx, task, recorded.name, error, log, {
      attempts: recorded.attempts,
      ...(letter
        ? { reason: 'dead_letter', dead_letter_id: letter.id, dead_letter_reason: letter.reason }
        : { reason: decision.reason }),
    });
  }
  const wanted = Date.now() + decision.delayMs;
  const placement = deps.retryBudget?.placeRetry(recorded.resource, wanted);
  const dueAt = new Date(placement?.dueAt ?? wanted);
  const deferredMs = placement?.deferredMs ?? 0;
  await scheduleStepRetry(tx, recorded.stepId, dueAt);
  recordRetryScheduled({
    step: recorded.name,
    attempt: recorded.attempts,
    errorClass: error.errorClass,
    nextAttemptAt: dueAt,
    deferredMs,
  });
  const retry = {
    error_class: error.errorClass,
    message: error.message,
    attempts: recorded.attempts,
    next_attempt_at: dueAt.toISOString(),
    ...(deferredMs > 0 ? { retry_budget_deferred_ms: deferredMs } : {}),
  };
  const applied: Applied = {
    ...NOTHING,
    retried: error.errorClass,
    ...(deferredMs > 0 ? { overBudget: recorded.resource } : {}),
  };
  if (deferredMs > 0) {
    log.info(
      {
        task_id: task.id,
        step: recorded.name,
        resource: recorded.resource,
        deferred_ms: deferredMs,
      },
      'retry budget used up: retry pushed later',
    );
  }
  // With a pause requested the task stays running too: the settler pauses it once nothing is in
  // flight, the retry waiting in the queue for a resume (`fail_retryable` would drop the request).
  if (task.pauseRequested || (await hasOtherActiveSteps(tx, task.id, recorded.stepId))) {
    await appendTaskEvent(tx, {
      taskId: task.id,
      type: 'step_retry_scheduled',
      step: recorded.name,
      data: retry,
    });
    return { ...applied, stepDueAt: dueAt };
  }
  await transition(tx, log, {
    taskId: task.id,
    step: recorded.name,
    event: { type: 'fail_retryable' },
    patch: { error },
    data: retry,
  });
  await addTimer(tx, { taskId: task.id, kind: TimerKind.RetryBackoff, dueAt });
  return { ...applied, timerArmed: true };
}

/**
 * A step that failed `schema_validation` and declares a repair step: the repair step starts next in
 * its place (same branch, if any) with what failed as its input, as a `continue` of the running
 * task — no state or event of its own — and its result continues the task as the failed step's
 * would have. At most `maxAttempts` repairs of the step per task attempt (counted from the task's
 * step rows); then, or when the repair cannot start, the task fails for good.
 */
async function repairOrFail(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  outcome: Extract<UnappliedOutcome['outcome'], { type: 'failed' }>,
  declared: ManifestStep,
  deps: ApplyDeps,
): Promise<Applied> {
  const { log } = deps;
  const { error } = outcome;
  const repairStep = declared.repairStep ?? '';
  const history = await repairHistoryOf(tx, {
    taskId: task.id,
    taskAttempt: task.attempt,
    seq: recorded.seq,
    failedStep: recorded.name,
    repairStep,
  });
  const decision = decideRepair({
    error,
    repairStep,
    repairsSoFar: history.repairsSoFar,
    maxRepairs: declared.maxAttempts,
  });
  if (!decision.repair) {
    return fail(tx, task, recorded.name, error, log, {
      attempts: recorded.attempts,
      reason: decision.reason,
      repairs: history.repairsSoFar,
    });
  }
  const input = repairInputOf({
    repairOf: recorded.name,
    input: history.input,
    result: outcome.result ?? null,
    error: error.message,
  });
  const started = await startContinuation(
    tx,
    task,
    { type: 'next', step: decision.step, input },
    { seq: recorded.seq, fanOutOf: recorded.fanOutOf, branchIndex: recorded.branchIndex },
  );
  if (!started.ok) {
    return fail(tx, task, recorded.name, error, log, {
      attempts: recorded.attempts,
      reason: 'repair_not_started',
      detail: started.reason,
    });
  }
  await transition(tx, log, {
    taskId: task.id,
    step: recorded.name,
    event: { type: 'continue' },
    data: {
      next: started.steps,
      repair_of: recorded.name,
      repair: history.repairsSoFar + 1,
      error_class: error.errorClass,
      message: error.message,
    },
    patch: { currentStep: started.label },
  });
  return { stepsAdded: true, abortTask: false };
}

/**
 * A step whose attempts ran out: its dead letter is written and the task fails with reason
 * `dead_letter`, in the same transaction, so a task is never failed without its letter (nor the
 * reverse). The event names the letter, which `AdminService` can redrive.
 */
async function deadLetter(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  error: SerializedStepError,
  log: Logger,
): Promise<Applied> {
  const reason = 'attempts_exhausted';
  const id = await insertDeadLetter(tx, {
    taskId: task.id,
    tenantId: task.tenantId,
    step: recorded.name,
    stepSeq: recorded.seq,
    reason,
    error,
    attempts: recorded.attempts,
  });
  log.warn(
    { task_id: task.id, step: recorded.name, dead_letter_id: id, attempts: recorded.attempts },
    'step attempts exhausted: dead letter written',
  );
  const failed = await fail(tx, task, recorded.name, error, log, {
    attempts: recorded.attempts,
    reason: 'dead_letter',
    dead_letter_id: id,
    dead_letter_reason: reason,
  });
  return { ...failed, deadLetter: reason };
}

/**
 * A step succeeded but what it asked for cannot start (`reason`: a step the pinned manifest does
 * not declare, a bad fan-out, a branch asking for an approval): the step is recorded failed, so a
 * retry runs it again rather than nothing, and the task fails for good.
 */
async function failContinuation(
  tx: Transaction,
  task: TaskRecord,
  recorded: UnappliedOutcome,
  reason: string,
  log: Logger,
): Promise<Applied> {
  const error = schemaError(reason);
  await failStepWhoseContinuationFailed(tx, task.id, recorded.seq, error);
  return fail(tx, task, recorded.name, error, log);
}

/** Fails the task for good and stops its other steps (waiting ones now, running ones by abort). */
async function fail(
  tx: Transaction,
  task: TaskRecord,
  step: string,
  error: SerializedStepError,
  log: Logger,
  detail: Record<string, Json> = {},
): Promise<Applied> {
  await transition(tx, log, {
    taskId: task.id,
    step,
    event: { type: 'fail_terminal' },
    patch: { error },
    data: { error_class: error.errorClass, message: error.message, ...detail },
  });
  await cancelWaitingSteps(tx, task.id);
  return { stepsAdded: false, abortTask: true };
}

async function transition(tx: Transaction, log: Logger, request: TransitionRequest): Promise<void> {
  noteTransition(log, request, await applyTransition(tx, request));
}

/** Records an applied transition on the active span, and logs a refusal. */
function noteTransition(log: Logger, request: TransitionRequest, result: TransitionResult): void {
  recordTransition(request, result);
  // The task row is locked and running, so the table allows every transition asked for here; a
  // refusal is a bug worth seeing, not a race.
  if (!result.ok)
    log.error(
      { task_id: request.taskId, event: request.event.type, reason: result.reason },
      'transition refused',
    );
}

function schemaError(message: string): SerializedStepError {
  return { errorClass: 'schema_validation', message, retryable: false };
}

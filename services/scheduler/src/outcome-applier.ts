/**
 * Turns recorded step outcomes into the task's next transition, in batches: a `next` adds the
 * following step to the ready queue, `complete` ends the task, a failure fails it, and a task whose
 * cancel or pause was requested settles as cancelled or paused once its step has stopped.
 *
 * Per-class retries, backoff timers and fan-out are built on this in later issues; here a failed
 * step fails its task (`failed_terminal`), with the error kept for `GetTask`.
 */
import {
  assertNever,
  type Json,
  type Priority,
  type SerializedStepError,
  type StepOutcome,
} from '@sluice/core';
import {
  applyTransition,
  findTaskType,
  insertNextStep,
  lockTask,
  lockUnappliedOutcomes,
  markOutcomesApplied,
  type Database,
  type TaskRecord,
  type Transaction,
  type TransitionRequest,
  type UnappliedOutcome,
} from '@sluice/db';
import type { Logger, Metrics } from '@sluice/telemetry';

/** What the applier needs. */
export interface OutcomeApplierDeps {
  readonly db: Database;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly batchSize: number;
  /** Called after a commit that added ready steps, so the dispatcher runs at once. */
  readonly onStepsReady: () => void;
}

/** Applies one batch of outcomes in one transaction; true when the batch was full. */
export async function applyOutcomeBatch(deps: OutcomeApplierDeps): Promise<boolean> {
  const { count, stepsAdded } = await deps.db.transaction(async (tx) => {
    const outcomes = await lockUnappliedOutcomes(tx, deps.batchSize);
    let added = 0;
    for (const outcome of outcomes) {
      if (await applyOne(tx, outcome, deps.log)) added++;
    }
    await markOutcomesApplied(
      tx,
      outcomes.map((o) => o.stepId),
    );
    return { count: outcomes.length, stepsAdded: added };
  });
  if (stepsAdded > 0) deps.onStepsReady();
  return count === deps.batchSize;
}

/** Applies one outcome; returns true when it added a ready step. */
async function applyOne(
  tx: Transaction,
  recorded: UnappliedOutcome,
  log: Logger,
): Promise<boolean> {
  const task = await lockTask(tx, recorded.taskId);
  if (!task)
    throw new Error(`outcome of step ${recorded.stepId} names unknown task ${recorded.taskId}`);
  let plan = planTransition(task, recorded.name, recorded.outcome);
  if (plan === undefined) return false;
  let resource: string | undefined;
  if (plan.nextStep) {
    resource = await resourceOf(tx, task, plan.nextStep.name);
    if (resource === undefined) {
      plan = failPlan(task, recorded.name, {
        errorClass: 'schema_validation',
        message: `step ${recorded.name} continued with ${plan.nextStep.name}, which ${task.type} v${task.typeVersion} does not declare`,
        retryable: false,
      });
    }
  }
  const result = await applyTransition(tx, plan.request);
  if (!result.ok) {
    // The task moved on meanwhile (e.g. it was cancelled while the step ran): the outcome stays
    // on the step row for the record, and the task's own state stands.
    log.info(
      {
        task_id: task.id,
        step: recorded.name,
        outcome: recorded.outcome.type,
        reason: result.reason,
      },
      'outcome not applied: the task has moved on',
    );
    return false;
  }
  if (!plan.nextStep || resource === undefined) return false;
  await insertNextStep(tx, {
    taskId: task.id,
    name: plan.nextStep.name,
    resource,
    tenantId: task.tenantId,
    priority: task.priority as Priority,
    input: plan.nextStep.input,
    taskAttempt: task.attempt,
  });
  return true;
}

/** The resource of a step of the task's pinned type version, from its manifest. */
async function resourceOf(
  tx: Transaction,
  task: TaskRecord,
  step: string,
): Promise<string | undefined> {
  const manifest = await findTaskType(tx, task.type, task.typeVersion);
  return manifest?.steps.find((s) => s.name === step)?.resource;
}

interface Plan {
  readonly request: TransitionRequest;
  /** The step to add to the ready queue once the transition applied. */
  readonly nextStep?: { readonly name: string; readonly input: Json };
}

function failPlan(task: TaskRecord, stepName: string, error: SerializedStepError): Plan {
  return {
    request: {
      taskId: task.id,
      step: stepName,
      event: { type: 'fail_terminal' },
      patch: { error },
      data: { error_class: error.errorClass, message: error.message },
    },
  };
}

/**
 * Chooses the transition for an outcome, or `undefined` when there is nothing to change (a step
 * that stopped for a task already cancelled).
 */
function planTransition(
  task: TaskRecord,
  stepName: string,
  outcome: StepOutcome,
): Plan | undefined {
  const base = { taskId: task.id, step: stepName };
  if (task.cancelRequested && outcome.type !== 'complete') {
    return {
      request: { ...base, event: { type: 'cancel_completed' }, patch: { currentStep: null } },
    };
  }
  switch (outcome.type) {
    case 'next':
      return {
        request: task.pauseRequested
          ? { ...base, event: { type: 'pause_completed' }, patch: { currentStep: outcome.step } }
          : {
              ...base,
              event: { type: 'continue' },
              patch: { currentStep: outcome.step },
              data: { next: outcome.step },
            },
        nextStep: { name: outcome.step, input: outcome.input },
      };
    case 'complete':
      return {
        request: {
          ...base,
          event: { type: 'complete' },
          patch: { currentStep: null, output: outcome.output, error: null },
        },
      };
    case 'failed':
      return failPlan(task, stepName, outcome.error);
    case 'cancelled':
      return undefined;
    default:
      return assertNever(outcome);
  }
}

/**
 * Starting what follows a step: the next step, the branches of a fan-out, and — once every branch
 * of a fan-out succeeded — its join. Used by the scheduler when it applies an outcome and by the
 * gateway when an approval lets a task continue. Resources come from the task's pinned manifest.
 * Call with the task row locked.
 */
import { and, eq } from 'drizzle-orm';
import {
  MAX_FAN_OUT_BRANCHES,
  type Continuation,
  type Json,
  type Priority,
  type StepOutcome,
} from '@sluice/core';
import type { Executor } from '../client.js';
import { taskSteps } from '../schema.js';
import { insertSteps, type NewStep } from './steps.js';
import { stepsLabel } from './steps-label.js';
import { findTaskType } from './task-types.js';
import type { TaskRecord } from './tasks.js';

/** Where a continuation comes from: the step whose outcome (or approval) asked for it. */
export interface ContinuationOrigin {
  readonly seq: number;
  /** Set when the origin is itself a branch of a fan-out: a `next` stays in that branch. */
  readonly fanOutOf: number | null;
  readonly branchIndex: number | null;
}

/** What starting a continuation did. */
export type ContinuationResult =
  | {
      readonly ok: true;
      readonly seqs: number[];
      readonly steps: string[];
      /** What the task now runs, for people: `fetchPage`, or `fetchPage ×5` for a fan-out. */
      readonly label: string;
    }
  | { readonly ok: false; readonly reason: string };

/** Adds the steps a continuation starts to the ready queue. */
export async function startContinuation(
  executor: Executor,
  task: TaskRecord,
  continuation: Continuation,
  origin: ContinuationOrigin,
): Promise<ContinuationResult> {
  const resourceOf = await manifestResources(executor, task);
  if (!resourceOf)
    return { ok: false, reason: `task type ${task.type} v${task.typeVersion} is not registered` };
  const base = {
    taskId: task.id,
    tenantId: task.tenantId,
    priority: task.priority as Priority,
    taskAttempt: task.attempt,
  };
  let steps: NewStep[];
  if (continuation.type === 'next') {
    const resource = resourceOf(continuation.step);
    if (!resource) return unknownStep(task, continuation.step);
    steps = [
      {
        ...base,
        name: continuation.step,
        resource,
        input: continuation.input,
        fanOutOf: origin.fanOutOf,
        branchIndex: origin.branchIndex,
      },
    ];
  } else {
    if (origin.fanOutOf !== null)
      return { ok: false, reason: 'a fan-out branch cannot fan out again' };
    const count = continuation.branches.length;
    if (count === 0 || count > MAX_FAN_OUT_BRANCHES) {
      return {
        ok: false,
        reason: `a fan-out needs 1 to ${MAX_FAN_OUT_BRANCHES} branches, got ${count}`,
      };
    }
    if (!resourceOf(continuation.join)) return unknownStep(task, continuation.join);
    steps = [];
    for (const [index, branch] of continuation.branches.entries()) {
      const resource = resourceOf(branch.step);
      if (!resource) return unknownStep(task, branch.step);
      steps.push({
        ...base,
        name: branch.step,
        resource,
        input: branch.input,
        fanOutOf: origin.seq,
        branchIndex: index,
      });
    }
  }
  const seqs = await insertSteps(executor, steps);
  const names = steps.map((step) => step.name);
  return { ok: true, seqs, steps: names, label: stepsLabel(names) };
}

/**
 * After a branch of the fan-out started by step `fanOutOf` succeeded: when every branch has, adds
 * the join step with input `{ outputs: [...] }` (branch outputs in branch order) and returns its
 * sequence. Returns `undefined` while branches are outstanding or when the join exists already.
 */
export async function joinIfComplete(
  executor: Executor,
  task: TaskRecord,
  fanOutOf: number,
): Promise<{ seq: number; name: string } | undefined> {
  const [origin] = await executor
    .select({ outcome: taskSteps.outcome })
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, task.id), eq(taskSteps.seq, fanOutOf)));
  const fanOut = origin?.outcome ? fanOutIn(origin.outcome) : undefined;
  if (!fanOut) throw new Error(`step ${fanOutOf} of task ${task.id} did not fan out`);
  const [existingJoin] = await executor
    .select({ seq: taskSteps.seq })
    .from(taskSteps)
    .where(
      and(
        eq(taskSteps.taskId, task.id),
        eq(taskSteps.joinOf, fanOutOf),
        eq(taskSteps.superseded, false),
      ),
    );
  if (existingJoin) return undefined;
  const branchRows = await executor
    .select({
      branchIndex: taskSteps.branchIndex,
      status: taskSteps.status,
      outcome: taskSteps.outcome,
    })
    .from(taskSteps)
    .where(and(eq(taskSteps.taskId, task.id), eq(taskSteps.fanOutOf, fanOutOf)));
  // A branch is done when one of its steps completed it (a branch may run several steps).
  const done = new Map<number, Json>();
  for (const row of branchRows) {
    if (
      row.branchIndex !== null &&
      row.status === 'succeeded' &&
      row.outcome?.type === 'complete'
    ) {
      done.set(row.branchIndex, row.outcome.output);
    }
  }
  if (done.size < fanOut.branches) return undefined;
  const resourceOf = await manifestResources(executor, task);
  const resource = resourceOf?.(fanOut.join);
  if (!resource) throw new Error(`join step ${fanOut.join} of task ${task.id} has no resource`);
  const ordered = Array.from({ length: fanOut.branches }, (_, index) => done.get(index) ?? null);
  const [seq] = await insertSteps(executor, [
    {
      taskId: task.id,
      tenantId: task.tenantId,
      priority: task.priority as Priority,
      taskAttempt: task.attempt,
      name: fanOut.join,
      resource,
      input: { outputs: ordered },
      joinOf: fanOutOf,
    },
  ]);
  if (seq === undefined) throw new Error(`could not add the join of task ${task.id}`);
  return { seq, name: fanOut.join };
}

/** The join and branch count of the fan-out an origin's outcome asked for (directly or after approval). */
function fanOutIn(outcome: StepOutcome): { join: string; branches: number } | undefined {
  if (outcome.type === 'fanOut') return { join: outcome.join, branches: outcome.branches.length };
  if (outcome.type === 'awaitApproval' && outcome.then.type === 'fanOut') {
    return { join: outcome.then.join, branches: outcome.then.branches.length };
  }
  return undefined;
}

async function manifestResources(
  executor: Executor,
  task: TaskRecord,
): Promise<((step: string) => string | undefined) | undefined> {
  const manifest = await findTaskType(executor, task.type, task.typeVersion);
  if (!manifest) return undefined;
  const byName = new Map(manifest.steps.map((step) => [step.name, step.resource]));
  return (step) => byName.get(step);
}

function unknownStep(task: TaskRecord, step: string): ContinuationResult {
  return { ok: false, reason: `${task.type} v${task.typeVersion} declares no step ${step}` };
}

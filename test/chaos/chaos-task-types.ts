/**
 * Task types of the process-kill tests (their executors load only these). Every step works for
 * `workMs` (tens of milliseconds) before it answers, so that a process killed at any moment is
 * likely to be in the middle of some step, and the work moves between two resources:
 *
 * - `chaos-flow`: `prepare` (chaos:a) fans out into `branches` × `part` (chaos:b), joined by
 *   `gather` (chaos:a), then `finish` (chaos:b) completes: 3 + `branches` steps per task.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { complete, defineTask, fanOut, joinInput, next } from '@sluice/sdk';

/** The two resources the steps alternate between. */
export const CHAOS_RESOURCES = ['chaos:a', 'chaos:b'] as const;

/** Steps of one `chaos-flow` task with `branches` parts. */
export function chaosFlowSteps(branches: number): number {
  return 3 + branches;
}

const flowInput = z.object({
  label: z.string().min(1),
  branches: z.number().int().min(1).max(16),
  workMs: z.number().int().min(0).max(1_000),
});

const partOutput = z.object({ index: z.number().int(), key: z.string() });

/** Works for `ms`, or stops at once when the step is aborted (cancel or timeout). */
function work(ms: number, signal: AbortSignal): Promise<void> {
  return sleep(ms, undefined, { signal });
}

export const chaosFlow = defineTask({
  name: 'chaos-flow',
  version: 1,
  description: 'A fan-out over two resources whose every step works a few tens of ms (test type).',
  input: flowInput,
  firstStep: 'prepare',
  steps: {
    prepare: { resource: 'chaos:a' },
    part: { resource: 'chaos:b', input: z.object({ index: z.number().int() }), output: partOutput },
    gather: { resource: 'chaos:a', input: joinInput(partOutput) },
    finish: { resource: 'chaos:b', input: z.object({ parts: z.number().int() }) },
  },
  handlers: {
    prepare: async (ctx) => {
      await work(ctx.taskInput.workMs, ctx.signal);
      return fanOut(
        Array.from({ length: ctx.taskInput.branches }, (_, index) => ({
          step: 'part' as const,
          input: { index },
        })),
        'gather',
      );
    },
    part: async (ctx) => {
      await work(ctx.taskInput.workMs, ctx.signal);
      return complete({ index: ctx.input.index, key: ctx.idempotencyKey });
    },
    gather: async (ctx) => {
      await work(ctx.taskInput.workMs, ctx.signal);
      const indexes = ctx.input.outputs.map((output) => output.index);
      const expected = Array.from({ length: ctx.taskInput.branches }, (_, index) => index);
      // A join that saw a branch twice or missed one is a bug the test must see as a failure.
      if (JSON.stringify(indexes) !== JSON.stringify(expected)) {
        throw new Error(`gather got branches ${JSON.stringify(indexes)}`);
      }
      return next('finish', { parts: indexes.length });
    },
    finish: async (ctx) => {
      await work(ctx.taskInput.workMs, ctx.signal);
      return complete({ label: ctx.taskInput.label, parts: ctx.input.parts });
    },
  },
});

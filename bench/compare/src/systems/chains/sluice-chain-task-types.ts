/**
 * The task type of Sluice's three-step chain (issue 7, workload 4): `bench-chain`, three steps on
 * three resources (`tool:bench-a`, `-b`, `-c`, so three executors hand the task on to each other
 * through the scheduler), each telling the harness it started (start-reports.ts, key
 * `<id>/<step>`, answered once the harness's handler resolved) and
 * returning `next` to the following step, the last `complete`.
 */
import { z } from 'zod';
import { complete, defineTask, next } from '@sluice/sdk';
import { reportStart } from '../start-reports.js';

export const CHAIN_RESOURCES = ['tool:bench-a', 'tool:bench-b', 'tool:bench-c'] as const;
export const CHAIN_TASK_TYPE = 'bench-chain';

/** Tells the harness that step `step` of the task's chain started (key `<job id>/<step>`). */
function report(jobId: string, step: number, signal: AbortSignal): Promise<void> {
  return reportStart(`${jobId}/${step}`, signal);
}

export const benchChain = defineTask({
  name: CHAIN_TASK_TYPE,
  version: 1,
  description: 'Three no-op steps on three resources that report their starts to the harness.',
  input: z.object({ job_id: z.string().min(1) }),
  firstStep: 'a',
  steps: {
    a: { resource: CHAIN_RESOURCES[0], maxAttempts: 3 },
    b: { resource: CHAIN_RESOURCES[1], maxAttempts: 3 },
    c: { resource: CHAIN_RESOURCES[2], maxAttempts: 3 },
  },
  handlers: {
    a: async (ctx) => {
      await report(ctx.taskInput.job_id, 0, ctx.signal);
      return next('b', {});
    },
    b: async (ctx) => {
      await report(ctx.taskInput.job_id, 1, ctx.signal);
      return next('c', {});
    },
    c: async (ctx) => {
      await report(ctx.taskInput.job_id, 2, ctx.signal);
      return complete({});
    },
  },
});

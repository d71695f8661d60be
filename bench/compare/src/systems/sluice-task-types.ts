/**
 * The task type of the Sluice adapter (issue 7): `bench-noop`, one step on `tool:bench` that tells
 * the harness its job started (start-reports.ts: a line on a loopback connection, answered once
 * the harness's handler resolved) and completes.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';
import { reportStart } from './start-reports.js';

export const BENCH_RESOURCE = 'tool:bench';
export const BENCH_TASK_TYPE = 'bench-noop';

export const benchNoop = defineTask({
  name: BENCH_TASK_TYPE,
  version: 1,
  description: 'A no-op step that reports its start to the benchmark harness.',
  input: z.object({ job_id: z.string().min(1) }),
  firstStep: 'run',
  steps: { run: { resource: BENCH_RESOURCE, maxAttempts: 3 } },
  handlers: {
    run: async (ctx) => {
      await reportStart(ctx.taskInput.job_id, ctx.signal);
      return complete({});
    },
  },
});

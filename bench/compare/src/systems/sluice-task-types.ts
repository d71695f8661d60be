/**
 * The task type of the Sluice adapter (issue 7): `bench-noop`, one step on `tool:bench` that tells
 * the harness its job started (a POST to `SLUICE_BENCH_REPORT_URL/job/<id>`, answered once the
 * harness's handler resolved) and completes. The loopback call is the cheapest way to let the
 * harness's ledger see every handler start — duplicates included, which task rows would hide.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';

export const BENCH_RESOURCE = 'tool:bench';
export const BENCH_TASK_TYPE = 'bench-noop';
export const REPORT_URL_VARIABLE = 'SLUICE_BENCH_REPORT_URL';

export const benchNoop = defineTask({
  name: BENCH_TASK_TYPE,
  version: 1,
  description: 'A no-op step that reports its start to the benchmark harness.',
  input: z.object({ job_id: z.string().min(1) }),
  firstStep: 'run',
  steps: { run: { resource: BENCH_RESOURCE, maxAttempts: 3 } },
  handlers: {
    run: async (ctx) => {
      const base = process.env[REPORT_URL_VARIABLE];
      if (!base) throw new Error(`${REPORT_URL_VARIABLE} is not set`);
      const response = await fetch(`${base}/job/${encodeURIComponent(ctx.taskInput.job_id)}`, {
        method: 'POST',
        signal: ctx.signal,
      });
      await response.arrayBuffer();
      if (!response.ok) throw new Error(`the harness answered ${response.status}`);
      return complete({});
    },
  },
});

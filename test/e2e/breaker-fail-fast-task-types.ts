/**
 * Task types of the breaker fail-fast test (issue 5): both call the fake tool
 * (`SLUICE_TEST_TOOL_URL`) once on `tool:flaky`, and differ only in what their step does while the
 * tool's circuit breaker is open.
 * - `bff-fail`: `whileBreakerOpen: 'fail'` — fails fast as retryable, three attempts with short
 *   backoffs, so its task ends `failed_terminal` quickly while the breaker stays open.
 * - `bff-wait`: the default (`wait`) — stays in the ready queue until the breaker lets calls through.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';
import { callTool } from './backpressure-task-types.js';

/** Attempts of the fail-fast step (each fast failure spends one). */
export const FAIL_FAST_ATTEMPTS = 3;

const labelled = z.object({ label: z.string().min(1) });

export const bffFail = defineTask({
  name: 'bff-fail',
  version: 1,
  description: 'One tool call that fails fast while the breaker is open (fail-fast test type).',
  input: labelled,
  firstStep: 'call',
  steps: {
    call: {
      resource: 'tool:flaky',
      whileBreakerOpen: 'fail',
      maxAttempts: FAIL_FAST_ATTEMPTS,
      backoff: { baseDelayMs: 50, maxDelayMs: 200 },
    },
  },
  handlers: {
    call: async (ctx) => {
      await callTool(ctx);
      return complete({ label: ctx.taskInput.label });
    },
  },
});

export const bffWait = defineTask({
  name: 'bff-wait',
  version: 1,
  description: 'One tool call that waits while the breaker is open (fail-fast test type).',
  input: labelled,
  firstStep: 'call',
  steps: {
    call: { resource: 'tool:flaky', maxAttempts: 5, backoff: { baseDelayMs: 50, maxDelayMs: 200 } },
  },
  handlers: {
    call: async (ctx) => {
      await callTool(ctx);
      return complete({ label: ctx.taskInput.label });
    },
  },
});

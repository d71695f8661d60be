/**
 * The task type of the tracing end-to-end test, `tr-traced`: three steps that make every kind of
 * span and event a task's trace holds.
 * - `fetch` (on `tool:trace`) calls the test's flaky HTTP tool at `ctx.taskInput.url`, which fails
 *   the first request with a 500: the step fails once and is retried;
 * - `ask` (on `tool:trace`) asks a person for approval, which the test grants;
 * - `summarize` (on `llm`) asks the fake LLM to summarize what `fetch` got.
 */
import { z } from 'zod';
import { HttpStatusError, awaitApproval, complete, defineTask, next } from '@sluice/sdk';

export const TRACE_RESOURCE = 'tool:trace';
/** Retries of `fetch` start within 200 ms (full jitter), so the test stays quick. */
export const TRACE_BACKOFF = { baseDelayMs: 100, maxDelayMs: 200 } as const;

export const trTraced = defineTask({
  name: 'tr-traced',
  version: 1,
  description: 'Fetch (retried once), approval, LLM summary: the tracing test type.',
  input: z.object({ url: z.string() }),
  firstStep: 'fetch',
  steps: {
    fetch: { resource: TRACE_RESOURCE, maxAttempts: 3, backoff: TRACE_BACKOFF, timeoutMs: 10_000 },
    ask: { resource: TRACE_RESOURCE, input: z.object({ text: z.string() }) },
    summarize: { resource: 'llm', input: z.object({ text: z.string() }), timeoutMs: 10_000 },
  },
  handlers: {
    fetch: async (ctx) => {
      const response = await fetch(ctx.taskInput.url, { signal: ctx.signal });
      if (!response.ok) {
        await response.arrayBuffer();
        throw HttpStatusError.fromResponse(response, 'the flaky tool');
      }
      return next('ask', { text: await response.text() });
    },
    ask: (ctx) =>
      Promise.resolve(
        awaitApproval({
          prompt: 'Summarize it?',
          timeoutMs: 600_000,
          onTimeout: 'cancel',
          then: next('summarize', { text: ctx.input.text }),
        }),
      ),
    summarize: async (ctx) => {
      const answer = await ctx.llm.chat({ messages: [{ role: 'user', content: ctx.input.text }] });
      return complete({ summary: answer.content });
    },
  },
});

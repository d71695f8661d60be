/**
 * The task types of the metrics end-to-end test, all on one resource (`tool:metrics`) and calling
 * the test's scripted HTTP tool at `ctx.taskInput.url`:
 * - `mt-fetch`: one call; a 500 is retried (the tool fails the first call of `/flaky/<key>`);
 * - `mt-approve`: asks for an approval, then completes;
 * - `mt-block`: one call that hangs until the step is aborted (the test cancels it while running);
 * - `mt-dead`: one call that hangs past the step's timeout, twice: a retry, then a dead letter.
 */
import { z } from 'zod';
import { HttpStatusError, awaitApproval, complete, defineTask, next } from '@sluice/sdk';

export const METRICS_RESOURCE = 'tool:metrics';
/** Retries start within 200 ms (full jitter), so the test stays quick. */
const BACKOFF = { baseDelayMs: 100, maxDelayMs: 200 } as const;
/** The timeout of `mt-dead`'s hanging call. */
export const DEAD_TIMEOUT_MS = 300;

const urlInput = z.object({ url: z.string() });

async function call(url: string, signal: AbortSignal): Promise<string> {
  const response = await fetch(url, { signal });
  if (!response.ok) {
    await response.arrayBuffer();
    throw HttpStatusError.fromResponse(response, 'the metrics test tool');
  }
  return response.text();
}

export const mtFetch = defineTask({
  name: 'mt-fetch',
  version: 1,
  description: 'Metrics test: one tool call, retried after a 500.',
  input: urlInput,
  firstStep: 'fetch',
  steps: {
    fetch: { resource: METRICS_RESOURCE, maxAttempts: 3, backoff: BACKOFF, timeoutMs: 10_000 },
  },
  handlers: {
    fetch: async (ctx) => complete({ body: await call(ctx.taskInput.url, ctx.signal) }),
  },
});

export const mtApprove = defineTask({
  name: 'mt-approve',
  version: 1,
  description: 'Metrics test: an approval, then done.',
  input: z.object({}),
  firstStep: 'ask',
  steps: {
    ask: { resource: METRICS_RESOURCE },
    done: { resource: METRICS_RESOURCE, input: z.object({ note: z.string() }) },
  },
  handlers: {
    ask: (ctx) =>
      Promise.resolve(
        awaitApproval({
          prompt: `Go on after ${ctx.step.name}?`,
          timeoutMs: 600_000,
          onTimeout: 'cancel',
          then: next('done', { note: 'approved' }),
        }),
      ),
    done: (ctx) => Promise.resolve(complete({ note: ctx.input.note })),
  },
});

export const mtBlock = defineTask({
  name: 'mt-block',
  version: 1,
  description: 'Metrics test: a call that runs until the task is cancelled.',
  input: urlInput,
  firstStep: 'wait',
  steps: { wait: { resource: METRICS_RESOURCE, maxAttempts: 1, timeoutMs: 60_000 } },
  handlers: {
    wait: async (ctx) => complete({ body: await call(ctx.taskInput.url, ctx.signal) }),
  },
});

export const mtDead = defineTask({
  name: 'mt-dead',
  version: 1,
  description: 'Metrics test: a call that always times out, until a dead letter.',
  input: urlInput,
  firstStep: 'wait',
  steps: {
    wait: {
      resource: METRICS_RESOURCE,
      maxAttempts: 2,
      backoff: BACKOFF,
      timeoutMs: DEAD_TIMEOUT_MS,
    },
  },
  handlers: {
    wait: async (ctx) => complete({ body: await call(ctx.taskInput.url, ctx.signal) }),
  },
});

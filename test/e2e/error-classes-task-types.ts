/**
 * The task types of the error-classes end-to-end test: one per error class, each a step that fails
 * that way, with short policies (per-step `backoff` and `maxAttempts`) so the test stays quick.
 * Tool steps call the test's scripted server at `ctx.taskInput.url`; the rate-limit step calls the
 * fake LLM endpoint.
 */
import { z } from 'zod';
import { HttpStatusError, awaitApproval, complete, defineTask, next } from '@sluice/sdk';

/** Every retried step of these types: full jitter up to 200 ms, then 400 ms. */
export const TEST_BACKOFF = { baseDelayMs: 200, maxDelayMs: 400 } as const;
/** The timeout of the step that hangs. */
export const TEST_TIMEOUT_MS = 300;
export const TEST_RESOURCE = 'tool:errors';

const urlInput = z.object({ url: z.string() });

/** Calls the scripted server; a non-2xx answer is thrown as the SDK's HttpStatusError. */
async function call(url: string, signal: AbortSignal): Promise<string> {
  const response = await fetch(url, { signal });
  if (!response.ok) throw HttpStatusError.fromResponse(response, 'the test server');
  return response.text();
}

/** A tool step that calls the server and completes with what it said. */
function toolType(name: string, maxAttempts: number) {
  return defineTask({
    name,
    version: 1,
    description: `Error class test: ${name}.`,
    input: urlInput,
    firstStep: 'call',
    steps: {
      call: {
        resource: TEST_RESOURCE,
        timeoutMs: TEST_TIMEOUT_MS,
        maxAttempts,
        backoff: TEST_BACKOFF,
      },
    },
    handlers: {
      call: async (ctx) => complete({ body: await call(ctx.taskInput.url, ctx.signal) }),
    },
  });
}

/** External 5xx, permission denied (401/403) and tool timeout: which one is up to the server. */
export const ecTool = toolType('ec-tool', 3);

export const ecRateLimit = defineTask({
  name: 'ec-rate-limit',
  version: 1,
  description: 'Error class test: an LLM call that is rate limited.',
  input: z.object({}),
  firstStep: 'chat',
  steps: { chat: { resource: 'llm', maxAttempts: 3, backoff: TEST_BACKOFF } },
  handlers: {
    chat: async (ctx) => {
      const answer = await ctx.llm.chat({ messages: [{ role: 'user', content: 'hello there' }] });
      return complete({ answer: answer.content });
    },
  },
});

export const ecSchema = defineTask({
  name: 'ec-schema',
  version: 1,
  description: 'Error class test: an output that fails its schema.',
  input: urlInput,
  firstStep: 'call',
  steps: {
    call: {
      resource: TEST_RESOURCE,
      maxAttempts: 3,
      backoff: TEST_BACKOFF,
      output: z.object({ length: z.number() }),
    },
  },
  handlers: {
    call: async (ctx) => {
      const body = await call(ctx.taskInput.url, ctx.signal);
      // The length as text, against the declared number: what a sloppy parser (or model) gives.
      return complete({ length: String(body.length) } as unknown as { length: number });
    },
  },
});

export const ecUnknown = defineTask({
  name: 'ec-unknown',
  version: 1,
  description: 'Error class test: a handler that throws a plain error.',
  input: urlInput,
  firstStep: 'call',
  steps: { call: { resource: TEST_RESOURCE, maxAttempts: 2, backoff: TEST_BACKOFF } },
  handlers: {
    call: async (ctx) => {
      await call(ctx.taskInput.url, ctx.signal);
      throw new Error('the answer made no sense');
    },
  },
});

export const ecApproval = defineTask({
  name: 'ec-approval',
  version: 1,
  description: 'Error class test: an approval nobody gives.',
  input: z.object({ onTimeout: z.enum(['pause', 'cancel']), timeoutMs: z.number().int() }),
  firstStep: 'ask',
  steps: {
    ask: { resource: TEST_RESOURCE },
    after: { resource: TEST_RESOURCE },
  },
  handlers: {
    ask: (ctx) =>
      awaitApproval({
        prompt: 'Go on?',
        timeoutMs: ctx.taskInput.timeoutMs,
        onTimeout: ctx.taskInput.onTimeout,
        then: next('after', {}),
      }),
    after: () => complete({}),
  },
});

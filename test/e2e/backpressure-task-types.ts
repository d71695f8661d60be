/**
 * Task types of the backpressure tests (issue 5):
 * - `bp-llm`: one step on `llm` that asks the model once (a 429 fails it as `llm_rate_limit`, and
 *   it is retried by class); records whether it ran degraded.
 * - `bp-tool`: one step on `tool:flaky` that calls the fake tool (`SLUICE_TEST_TOOL_URL`); a 500
 *   fails it as `external_5xx`, which the tool's circuit breaker counts.
 * - `bp-count`: one step on `tool:count` that calls the fake tool with its tenant, so the tool
 *   can count calls in flight per tenant.
 * Steps retry generously (their tasks must survive the pressure the tests create) with short
 * backoffs, so the tests finish quickly.
 */
import { z } from 'zod';
import { complete, defineTask, HttpStatusError } from '@sluice/sdk';

const TOOL_URL_VARIABLE = 'SLUICE_TEST_TOOL_URL';

/** Calls the fake tool once for the step's tenant; a non-2xx answer throws `HttpStatusError`. */
export async function callTool(ctx: { tenantId: string; signal: AbortSignal }): Promise<void> {
  const base = process.env[TOOL_URL_VARIABLE];
  if (!base) throw new Error(`${TOOL_URL_VARIABLE} is not set`);
  const response = await fetch(`${base}/call?tenant=${encodeURIComponent(ctx.tenantId)}`, {
    signal: ctx.signal,
  });
  if (!response.ok) throw HttpStatusError.fromResponse(response, 'the fake tool');
  await response.arrayBuffer();
}

const labelled = z.object({ label: z.string().min(1) });

export const bpLlm = defineTask({
  name: 'bp-llm',
  version: 1,
  description: 'One LLM call (backpressure test type).',
  input: labelled,
  firstStep: 'ask',
  steps: {
    ask: { resource: 'llm', maxAttempts: 100, backoff: { baseDelayMs: 100, maxDelayMs: 1_000 } },
  },
  handlers: {
    ask: async (ctx) => {
      const answer = await ctx.llm.chat({
        messages: [{ role: 'user', content: `label ${ctx.taskInput.label}` }],
        maxTokens: 16,
      });
      return complete({ degraded: ctx.degraded, chars: answer.content.length });
    },
  },
});

export const bpTool = defineTask({
  name: 'bp-tool',
  version: 1,
  description: 'One call of a tool that can fail (backpressure test type).',
  input: labelled,
  firstStep: 'call',
  steps: {
    call: {
      resource: 'tool:flaky',
      maxAttempts: 100,
      backoff: { baseDelayMs: 100, maxDelayMs: 500 },
    },
  },
  handlers: {
    call: async (ctx) => {
      await callTool(ctx);
      return complete({ label: ctx.taskInput.label });
    },
  },
});

export const bpCount = defineTask({
  name: 'bp-count',
  version: 1,
  description:
    'One call of a tool that counts calls in flight per tenant (backpressure test type).',
  input: labelled,
  firstStep: 'call',
  steps: { call: { resource: 'tool:count', maxAttempts: 5 } },
  handlers: {
    call: async (ctx) => {
      await callTool(ctx);
      return complete({ label: ctx.taskInput.label });
    },
  },
});

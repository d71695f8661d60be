/**
 * The task type of the logs end-to-end test, `lg-logged`: two steps on `llm` that log through
 * `ctx.logger`, so the test can read those lines back from the executor's output.
 * - `note` logs an info line and a debug line (below the configured level: never written);
 * - `ask` logs, calls the fake LLM (which may answer 401), and logs the answer's length.
 */
import { z } from 'zod';
import { complete, defineTask, next } from '@sluice/sdk';

/** The messages the handlers log, as the test looks for them. */
export const LOGS_MESSAGES = {
  note: 'lg note taken',
  noteDebug: 'lg note detail',
  asking: 'lg asking the model',
  answered: 'lg model answered',
} as const;

export const lgLogged = defineTask({
  name: 'lg-logged',
  version: 1,
  description: 'Two logging steps, the second calling the LLM: the logs test type.',
  input: z.object({ topic: z.string() }),
  firstStep: 'note',
  steps: {
    note: { resource: 'llm', timeoutMs: 10_000 },
    // One attempt: a 401 from the model ends the task instead of being retried.
    ask: {
      resource: 'llm',
      input: z.object({ text: z.string() }),
      maxAttempts: 1,
      timeoutMs: 10_000,
    },
  },
  handlers: {
    note: (ctx) => {
      ctx.logger.info({ topic: ctx.taskInput.topic }, LOGS_MESSAGES.note);
      ctx.logger.debug({ topic: ctx.taskInput.topic }, LOGS_MESSAGES.noteDebug);
      return Promise.resolve(next('ask', { text: `Tell me about ${ctx.taskInput.topic}.` }));
    },
    ask: async (ctx) => {
      ctx.logger.info({}, LOGS_MESSAGES.asking);
      const answer = await ctx.llm.chat({ messages: [{ role: 'user', content: ctx.input.text }] });
      ctx.logger.info({ chars: answer.content.length }, LOGS_MESSAGES.answered);
      return complete({ summary: answer.content });
    },
  },
});

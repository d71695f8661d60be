/**
 * Task types of the retention end-to-end test (its executors load only these):
 * - `rt-quick`: one step that completes at once with its input;
 * - `rt-doomed`: one step, one attempt, that always throws, so the task ends `failed_terminal`
 *   with a dead letter.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';

export const rtQuick = defineTask({
  name: 'rt-quick',
  version: 1,
  description: 'Completes at once (test type).',
  input: z.object({ n: z.number().int() }),
  firstStep: 'only',
  steps: { only: { resource: 'llm' } },
  handlers: {
    only: (ctx) => Promise.resolve(complete({ n: ctx.taskInput.n })),
  },
});

export const rtDoomed = defineTask({
  name: 'rt-doomed',
  version: 1,
  description: 'Always fails, with no retry (test type).',
  input: z.object({ n: z.number().int() }),
  firstStep: 'only',
  steps: { only: { resource: 'llm', maxAttempts: 1 } },
  handlers: {
    only: () => Promise.reject(new Error('this step always fails')),
  },
});

/**
 * The task types of the repair-step end-to-end test. `draft` parses a "model answer" (JSON text
 * from the task input, as an LLM step would parse its reply) into an output with a schema; an
 * answer that does not match fails the step as `schema_validation`. In `repair-draft` the step
 * declares `fix` as its repair step, which reads what `draft` returned and fixes it; `repair-none`
 * has the same step without one.
 */
import { z } from 'zod';
import { complete, defineTask, repairInput } from '@sluice/sdk';

const answer = z.object({ words: z.number().int() });
const input = z.object({ modelAnswer: z.string() });

/** Counts the words of an answer that gave them as text instead of a number. */
function repaired(result: unknown): number {
  const words = z.object({ output: z.object({ words: z.unknown() }) }).safeParse(result).data
    ?.output.words;
  return typeof words === 'string' ? words.trim().split(/\s+/).length : 0;
}

export const repairDraft = defineTask({
  name: 'repair-draft',
  version: 1,
  description: 'A step whose output may fail its schema, with a repair step (test type).',
  input,
  firstStep: 'draft',
  steps: {
    draft: { resource: 'tool:repair', output: answer, maxAttempts: 2, repairStep: 'fix' },
    fix: {
      resource: 'tool:repair',
      input: repairInput(),
      output: answer.extend({ repairOf: z.string(), error: z.string() }),
    },
  },
  handlers: {
    draft: (ctx) => complete(JSON.parse(ctx.taskInput.modelAnswer) as z.input<typeof answer>),
    fix: (ctx) =>
      complete({
        words: repaired(ctx.input.result),
        repairOf: ctx.input.repairOf,
        error: ctx.input.error,
      }),
  },
});

export const repairNone = defineTask({
  name: 'repair-none',
  version: 1,
  description: 'The same step without a repair step (test type).',
  input,
  firstStep: 'draft',
  steps: {
    draft: { resource: 'tool:repair', output: answer },
  },
  handlers: {
    draft: (ctx) => complete(JSON.parse(ctx.taskInput.modelAnswer) as z.input<typeof answer>),
  },
});

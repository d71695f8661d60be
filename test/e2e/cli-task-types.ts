/**
 * Task types of the CLI's end-to-end test, the only ones its executors load (`SLUICE_TASK_MODULES`),
 * so the test does not depend on the samples. None calls anything outside; each puts a task where a
 * test needs it:
 * - `cli-steps` runs two steps, on `llm` (reporting progress) and on `tool:http`, and succeeds;
 * - `cli-held` stays queued: its first step runs on a resource no executor of the test serves
 *   (its second step is on `llm`, so the `llm` executor registers the type);
 * - `cli-fails` fails for good in its first step: its declared input does not match the task
 *   input, a `schema_validation` error, which is never retried;
 * - `cli-approval` asks a person for approval, then completes.
 *
 * The handlers do nothing asynchronous; they return promises because the SDK's handlers do.
 */
import { z } from 'zod';
import { awaitApproval, complete, defineTask, next } from '@sluice/sdk';

/** The resource of `cli-held`'s first step; nothing executes it. */
export const HELD_RESOURCE = 'tool:held';

/** The question `cli-approval` asks, for a label. */
export function approvalPrompt(label: string): string {
  return `Publish the report "${label}"?`;
}

const labelled = z.object({ label: z.string() });

export const cliSteps = defineTask({
  name: 'cli-steps',
  version: 1,
  description: 'Drafts, then publishes a report of some pages (test type).',
  input: z.object({ label: z.string().min(1), pages: z.number().int().min(1).max(10) }),
  firstStep: 'draft',
  steps: {
    draft: { resource: 'llm' },
    publish: { resource: 'tool:http', input: z.object({ title: z.string() }) },
  },
  handlers: {
    draft: async (ctx) => {
      await ctx.progress(0.5, `drafting ${ctx.taskInput.pages} pages`);
      return next('publish', { title: `Report ${ctx.taskInput.label}` }, { drafted: true });
    },
    publish: (ctx) =>
      Promise.resolve(complete({ title: ctx.input.title, pages: ctx.taskInput.pages })),
  },
});

export const cliHeld = defineTask({
  name: 'cli-held',
  version: 1,
  description: 'Waits in the queue until cancelled (test type).',
  input: labelled,
  firstStep: 'hold',
  steps: {
    hold: { resource: HELD_RESOURCE },
    finish: { resource: 'llm' },
  },
  handlers: {
    hold: (ctx) => Promise.resolve(next('finish', { label: ctx.taskInput.label })),
    finish: () => Promise.resolve(complete()),
  },
});

export const cliFails = defineTask({
  name: 'cli-fails',
  version: 1,
  description: 'Fails its first step with a schema error (test type).',
  input: labelled,
  firstStep: 'check',
  steps: {
    check: { resource: 'llm', input: z.object({ mustExist: z.string() }) },
  },
  handlers: {
    check: () => Promise.resolve(complete()),
  },
});

export const cliApproval = defineTask({
  name: 'cli-approval',
  version: 1,
  description: 'Asks for approval, then completes (test type).',
  input: labelled,
  firstStep: 'ask',
  steps: {
    ask: { resource: 'llm' },
    publish: { resource: 'llm' },
  },
  handlers: {
    ask: (ctx) =>
      Promise.resolve(
        awaitApproval({
          prompt: approvalPrompt(ctx.taskInput.label),
          timeoutMs: 10 * 60 * 1000,
          onTimeout: 'cancel',
          then: next('publish', { label: ctx.taskInput.label }),
        }),
      ),
    publish: (ctx) => Promise.resolve(complete({ published: ctx.taskInput.label })),
  },
});

/**
 * `@sluice/sdk` — define task types for Sluice executors.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { complete, defineTask, next } from '@sluice/sdk';
 *
 * export const summarize = defineTask({
 *   name: 'summarize',
 *   version: 1,
 *   input: z.object({ url: z.string().url() }),
 *   firstStep: 'fetch',
 *   steps: {
 *     fetch: {
 *       resource: 'tool:http',
 *       run: async (ctx) => {
 *         const page = await fetch(ctx.taskInput.url, { signal: ctx.signal });
 *         return next('summarize', { text: await page.text() });
 *       },
 *     },
 *     summarize: {
 *       resource: 'llm',
 *       run: async (ctx) => complete((await ctx.llm.chat({ messages: [{ role: 'user', content: JSON.stringify(ctx.input) }] })).content),
 *     },
 *   },
 * });
 * ```
 */
export {
  complete,
  defineTask,
  isTaskDefinition,
  next,
  toStepOutcome,
  DEFAULT_STEP_MAX_ATTEMPTS,
  DEFAULT_STEP_TIMEOUT_MS,
} from './define-task.js';
export type {
  StepDefinition,
  StepResult,
  TaskDefinition,
  TaskDefinitionSpec,
} from './define-task.js';
export type {
  ChatCompletion,
  ChatMessage,
  LlmClient,
  StepContext,
  StepLogger,
} from './step-context.js';
export { HttpStatusError, parseRetryAfter } from './errors.js';

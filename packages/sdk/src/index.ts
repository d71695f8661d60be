/**
 * `@sluice/sdk` — define task types for Sluice executors.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { branch, complete, defineTask, fanOut, joinInput } from '@sluice/sdk';
 *
 * const page = z.object({ url: z.string(), chars: z.number() });
 *
 * export const crawl = defineTask({
 *   name: 'crawl',
 *   version: 1,
 *   input: z.object({ urls: z.array(z.url()).min(1).max(20) }),
 *   firstStep: 'plan',
 *   steps: {
 *     plan: { resource: 'llm' },
 *     fetchPage: { resource: 'tool:http', timeoutMs: 30_000, input: z.object({ url: z.string() }), output: page },
 *     report: { resource: 'llm', input: joinInput(page) },
 *   },
 *   handlers: {
 *     plan: async (ctx) => fanOut(ctx.taskInput.urls.map((url) => branch('fetchPage', { url })), 'report'),
 *     fetchPage: async (ctx) => {
 *       const text = await (await fetch(ctx.input.url, { signal: ctx.signal })).text();
 *       return complete({ url: ctx.input.url, chars: text.length }); // ends the branch
 *     },
 *     report: async (ctx) => complete({ total: ctx.input.outputs.reduce((n, p) => n + p.chars, 0) }),
 *   },
 * });
 * ```
 */
export {
  DEFAULT_STEP_MAX_ATTEMPTS,
  DEFAULT_STEP_TIMEOUT_MS,
  MAX_STEP_ATTEMPTS,
  MAX_STEP_BACKOFF_MS,
  MAX_STEP_TIMEOUT_MS,
  defineTask,
  isTaskDefinition,
  joinInput,
  repairInput,
  WHILE_BREAKER_OPEN,
} from './define-task.js';
export type {
  StepBackoff,
  StepDeclaration,
  StepDefinition,
  StepHandler,
  StepHandlers,
  StepInput,
  StepInputArg,
  StepName,
  StepOutput,
  StepOutputArg,
  StepOutputs,
  StepResultOf,
  TaskDefinition,
  TaskSpec,
  WhileBreakerOpen,
} from './define-task.js';
export { STEP_RESULT_TYPES, awaitApproval, branch, complete, fanOut, next } from './step-result.js';
export type {
  ApprovalRequest,
  AwaitApprovalResult,
  Branch,
  CompleteResult,
  FanOutResult,
  NextResult,
  StepResult,
} from './step-result.js';
export {
  MAX_APPROVAL_PROMPT_CHARS,
  StepResultError,
  issuesOf,
  toStepOutcome,
} from './to-step-outcome.js';
export type { StepResultOrigin } from './to-step-outcome.js';
export { MAX_JSON_DEPTH, toJson } from './json.js';
export type { JsonCheck } from './json.js';
export type {
  ApprovalDecision,
  ChatCompletion,
  ChatMessage,
  LlmClient,
  SpanAttributeValue,
  StepContext,
  StepLogger,
  StepSpan,
  UntypedOutputs,
} from './step-context.js';
export { HttpStatusError, parseRetryAfter } from './errors.js';

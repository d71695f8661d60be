/**
 * Type tests of task authoring, checked by `tsc` (part of `npm test`): what a handler sees is
 * inferred from the declarations, and misuse does not compile (each `@ts-expect-error` line must
 * be an error, or tsc fails with "unused directive"). Nothing here runs.
 */
import { z } from 'zod';
import type { Json } from '@sluice/core';
import { defineTask, joinInput, type TaskDefinition } from './define-task.js';
import type { ApprovalDecision, StepSpan } from './step-context.js';
import { awaitApproval, branch, complete, fanOut, next } from './step-result.js';

// ---- Hand-written type assertions --------------------------------------------------------------

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when `value`'s type is exactly `Expected`. */
function expectType<Expected>() {
  return <Actual>(value: Actual, ..._proof: Equal<Actual, Expected> extends true ? [] : [never]) =>
    value;
}

// ---- Schemas of a research task ----------------------------------------------------------------

const taskInput = z.object({
  topic: z.string(),
  urls: z.array(z.string()).default([]),
});
const outline = z.object({ outline: z.string(), words: z.number() });
const pageRequest = z.object({ url: z.string() });
const page = z.object({ url: z.string(), chars: z.number() });

export const research = defineTask({
  name: 'research',
  version: 1,
  input: taskInput,
  firstStep: 'outline',
  steps: {
    outline: { resource: 'llm', output: outline },
    fetchPage: { resource: 'tool:http', input: pageRequest, output: page },
    summarize: { resource: 'llm', input: joinInput(page) },
    note: { resource: 'llm' },
  },
  handlers: {
    async outline(ctx) {
      // The task input is the schema's output type (defaults applied: `urls` is not optional).
      expectType<{ topic: string; urls: string[] }>()(ctx.taskInput);
      // The first step declares no input: untyped JSON.
      expectType<Json>()(ctx.input);
      expectType<StepSpan>()(ctx.span);
      expectType<ApprovalDecision | undefined>()(ctx.approval);
      expectType<string>()(ctx.idempotencyKey);
      expectType<number>()(ctx.attempt);
      await ctx.progress(0.5, 'half way');
      return awaitApproval({
        prompt: `Approve the outline of ${ctx.taskInput.topic}?`,
        timeoutMs: 60_000,
        onTimeout: 'pause',
        then: fanOut(
          ctx.taskInput.urls.map((url) => branch('fetchPage', { url })),
          'summarize',
        ),
        output: { outline: 'a b c', words: 3 },
      });
    },
    fetchPage(ctx) {
      // A handler need not be async.
      // The declared input, parsed.
      expectType<{ url: string }>()(ctx.input);
      // Earlier outputs: typed by their declared schema, possibly absent; untyped ones are JSON.
      expectType<{ outline: string; words: number } | undefined>()(ctx.outputs.outline);
      expectType<{ url: string; chars: number } | undefined>()(ctx.outputs.fetchPage);
      expectType<Json | undefined>()(ctx.outputs.note);
      expectType<{ outline: string; words: number }>()(ctx.outputOf('outline'));
      return complete({ url: ctx.input.url, chars: 42 });
    },
    summarize(ctx) {
      // The join's input: one output per branch.
      expectType<{ outputs: Array<{ url: string; chars: number }> }>()(ctx.input);
      const total = ctx.input.outputs.reduce((sum, p) => sum + p.chars, 0);
      return next('note', { total });
    },
    note(ctx) {
      // An undeclared output accepts anything here (it is checked as JSON at run time).
      return complete({ note: ctx.input, at: ctx.step.seq });
    },
  },
});
expectType<TaskDefinition<typeof taskInput>>()(research);
// A typed definition is a plain definition, as executors load them.
export const loaded: readonly TaskDefinition[] = [research];

// ---- What must not compile ---------------------------------------------------------------------

const steps = {
  a: { resource: 'llm', output: z.object({ n: z.number() }) },
  b: { resource: 'tool:http', input: z.object({ url: z.string() }) },
} as const;

export const misuse = defineTask({
  name: 'misuse',
  version: 1,
  input: z.object({ topic: z.string() }),
  // @ts-expect-error firstStep must name a declared step
  firstStep: 'nope',
  steps,
  handlers: {
    a(ctx) {
      // @ts-expect-error the task input has no such field
      void ctx.taskInput.missing;
      // @ts-expect-error outputs of unknown steps do not exist
      void ctx.outputs.nope;
      // @ts-expect-error outputOf takes step names only
      void ctx.outputOf('nope');
      switch (ctx.attempt) {
        case 1:
          // @ts-expect-error next to a step that does not exist
          return next('nope', {}, { n: 1 });
        case 2:
          // @ts-expect-error the input does not match step b's schema
          return next('b', { url: 42 }, { n: 1 });
        case 3:
          // @ts-expect-error step a declares an output: it must be given
          return next('b', { url: 'x' });
        case 4:
          // @ts-expect-error the output does not match step a's output schema
          return next('b', { url: 'x' }, { n: 'one' });
        case 5:
          // @ts-expect-error a branch to a step that does not exist
          return fanOut([branch('nope', {})], 'b', { n: 1 });
        case 6:
          // @ts-expect-error a branch input that does not match the step's schema
          return fanOut([{ step: 'b', input: { url: 1 } }], 'b', { n: 1 });
        case 7:
          // @ts-expect-error the join must be a step
          return fanOut([branch('b', { url: 'x' })], 'nope', { n: 1 });
        case 8:
          // @ts-expect-error complete with an output that does not match the schema
          return complete({ n: 'one' });
        case 9:
          return awaitApproval({
            prompt: 'ok?',
            timeoutMs: 1_000,
            // @ts-expect-error onTimeout is 'pause' or 'cancel'
            onTimeout: 'fail',
            then: next('b', { url: 'x' }),
            output: { n: 1 },
          });
        case 10:
          return awaitApproval({
            prompt: 'ok?',
            timeoutMs: 1_000,
            onTimeout: 'pause',
            // @ts-expect-error the approval's continuation has no output of its own
            then: next('b', { url: 'x' }, { n: 1 }),
            output: { n: 1 },
          });
        default:
          return complete({ n: 1 });
      }
    },
    b(ctx) {
      // @ts-expect-error the input is typed: no such field
      void ctx.input.nope;
      return complete();
    },
  },
});

defineTask({
  name: 'missing-handler',
  version: 1,
  input: z.object({}),
  firstStep: 'a',
  steps: { a: { resource: 'llm' }, b: { resource: 'llm' } },
  // @ts-expect-error every declared step needs a handler
  handlers: { a: () => complete(null) },
});

defineTask({
  name: 'extra-handler',
  version: 1,
  input: z.object({}),
  firstStep: 'a',
  steps: { a: { resource: 'llm' } },
  handlers: {
    a: () => complete(null),
    // @ts-expect-error a handler without a declared step
    b: () => complete(null),
  },
});

// Outside a handler the builders are untyped (the executor checks at run time).
expectType<string>()(next('anything', 1).step);
expectType<string>()(fanOut([{ step: 'x', input: null }], 'y').join);

// A handler that takes no `ctx` is typed after the fact: a matching output compiles…
defineTask({
  name: 'no-ctx',
  version: 1,
  input: z.object({}),
  firstStep: 'a',
  steps: { a: { resource: 'llm', output: z.object({ n: z.number() }) } },
  handlers: { a: () => complete({ n: 1 }) },
});
// …and a wrong one does not (reported on the handler rather than the argument).
defineTask({
  name: 'no-ctx-wrong',
  version: 1,
  input: z.object({}),
  firstStep: 'a',
  steps: { a: { resource: 'llm', output: z.object({ n: z.number() }) } },
  // @ts-expect-error the output does not match the declared schema
  handlers: { a: () => complete({ n: 'one' }) },
});

// An output schema that accepts `undefined` makes the output optional, as an undeclared one:
// each builder compiles without it, and with it.
defineTask({
  name: 'optional-output',
  version: 1,
  input: z.object({}),
  firstStep: 'a',
  steps: {
    a: { resource: 'llm', output: z.object({ n: z.number() }).optional() },
    b: { resource: 'llm', input: z.object({ url: z.string() }) },
  },
  handlers: {
    a(ctx) {
      switch (ctx.attempt) {
        case 1:
          return complete();
        case 2:
          return next('b', { url: 'x' });
        case 3:
          return fanOut([branch('b', { url: 'x' })], 'b');
        case 4:
          return awaitApproval({
            prompt: 'ok?',
            timeoutMs: 1_000,
            onTimeout: 'pause',
            then: next('b', { url: 'x' }),
          });
        case 5:
          return next('b', { url: 'x' }, { n: 1 });
        default:
          // @ts-expect-error an output given must still match the schema
          return complete({ n: 'one' });
      }
    },
    b: () => complete(),
  },
});

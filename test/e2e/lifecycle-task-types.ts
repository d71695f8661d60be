/**
 * Task types of the lifecycle end-to-end test (its executors load only these). Every step waits at
 * a latch of the test's latch server (`GET <latch>/latch/<task>:<step>`, sending its idempotency
 * key) until the test releases it, so the test can act while a step is known to be running.
 * - `lc-linear`: three steps, `one` → `two` → `three`, on `tool:latch`;
 * - `lc-fan`: `split` fans out into `count` branches `leaf`, joined by `gather`;
 * - `lc-approval`: `ask` asks for approval (timeout and timeout action from the input), then `done`.
 */
import { z } from 'zod';
import { awaitApproval, complete, defineTask, fanOut, next } from '@sluice/sdk';

/** Where the steps find the latch server (set on the executors by the test). */
const LATCH_URL_VARIABLE = 'SLUICE_TEST_LATCH_URL';

async function waitAtLatch(
  ctx: { taskId: string; idempotencyKey: string; signal: AbortSignal },
  name: string,
): Promise<void> {
  const base = process.env[LATCH_URL_VARIABLE];
  if (!base) throw new Error(`${LATCH_URL_VARIABLE} is not set`);
  const response = await fetch(`${base}/latch/${ctx.taskId}:${name}`, {
    signal: ctx.signal,
    headers: { 'idempotency-key': ctx.idempotencyKey },
  });
  if (!response.ok) throw new Error(`latch ${name} answered ${response.status}`);
  await response.arrayBuffer();
}

const labelled = z.object({ label: z.string().min(1) });

export const lcLinear = defineTask({
  name: 'lc-linear',
  version: 1,
  description: 'Three latched steps in a row (test type).',
  input: labelled,
  firstStep: 'one',
  steps: {
    one: { resource: 'tool:latch' },
    two: { resource: 'tool:latch' },
    three: { resource: 'tool:latch' },
  },
  handlers: {
    one: async (ctx) => {
      await waitAtLatch(ctx, 'one');
      return next('two', { from: 'one' }, { step: 'one', key: ctx.idempotencyKey });
    },
    two: async (ctx) => {
      await waitAtLatch(ctx, 'two');
      return next('three', { from: 'two' }, { step: 'two', key: ctx.idempotencyKey });
    },
    three: async (ctx) => {
      await waitAtLatch(ctx, 'three');
      return complete({ label: ctx.taskInput.label, done: true });
    },
  },
});

export const lcFan = defineTask({
  name: 'lc-fan',
  version: 1,
  description: 'A latched fan-out joined once (test type).',
  input: z.object({ count: z.number().int().min(1).max(50), latched: z.boolean() }),
  firstStep: 'split',
  steps: {
    split: { resource: 'llm' },
    leaf: { resource: 'tool:latch', input: z.object({ index: z.number().int() }) },
    gather: { resource: 'llm' },
  },
  handlers: {
    split: (ctx) =>
      Promise.resolve(
        fanOut(
          Array.from({ length: ctx.taskInput.count }, (_, index) => ({
            step: 'leaf' as const,
            input: { index },
          })),
          'gather',
        ),
      ),
    leaf: async (ctx) => {
      if (ctx.taskInput.latched) await waitAtLatch(ctx, `leaf${ctx.input.index}`);
      return complete({ index: ctx.input.index, key: ctx.idempotencyKey });
    },
    gather: (ctx) => Promise.resolve(complete({ joined: ctx.input })),
  },
});

export const lcApproval = defineTask({
  name: 'lc-approval',
  version: 1,
  description: 'Asks for approval, then finishes (test type).',
  input: z.object({
    label: z.string().min(1),
    timeoutMs: z.number().int().min(1),
    onTimeout: z.enum(['pause', 'cancel']),
  }),
  firstStep: 'ask',
  steps: {
    ask: { resource: 'llm' },
    done: { resource: 'llm' },
  },
  handlers: {
    ask: (ctx) =>
      Promise.resolve(
        awaitApproval({
          prompt: `Ship ${ctx.taskInput.label}?`,
          timeoutMs: ctx.taskInput.timeoutMs,
          onTimeout: ctx.taskInput.onTimeout,
          then: next('done', { label: ctx.taskInput.label }),
        }),
      ),
    done: (ctx) =>
      Promise.resolve(complete({ shipped: ctx.taskInput.label, approval: ctx.approval ?? null })),
  },
});

/** The resource of `lc-held`'s first step: no executor of the test serves it. */
export const HELD_RESOURCE = 'tool:none';

export const lcHeld = defineTask({
  name: 'lc-held',
  version: 1,
  description: 'Stays queued: its first step waits for an executor that never comes (test type).',
  input: labelled,
  firstStep: 'hold',
  steps: {
    hold: { resource: HELD_RESOURCE },
    // A step on `llm`, so the llm executor registers the type.
    finish: { resource: 'llm' },
  },
  handlers: {
    hold: (ctx) => Promise.resolve(next('finish', { label: ctx.taskInput.label })),
    finish: () => Promise.resolve(complete({})),
  },
});

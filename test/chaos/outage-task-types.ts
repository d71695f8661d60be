/**
 * Task types of the outage scenarios (test/chaos/outages.test.ts; its executors load only these).
 * `outage-chain` is three steps that alternate between two resources, so every task passes through
 * both executors and the scheduler three times; each handler works for tens of milliseconds (a
 * stand-in for a short model or tool call) and gives up at once when its step is aborted.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { complete, defineTask, next } from '@sluice/sdk';

/** The two resources the steps alternate between (one executor each in the test). */
export const OUTAGE_RESOURCES = ['tool:outage_a', 'tool:outage_b'] as const;

/** Steps per `outage-chain` task. */
export const OUTAGE_CHAIN_STEPS = 3;

/** A handler's work: 20–50 ms, varying by task and step so that steps interleave. */
async function work(ctx: { idempotencyKey: string; signal: AbortSignal }): Promise<number> {
  let hash = 0;
  for (const char of ctx.idempotencyKey) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  const ms = 20 + (hash % 31);
  await delay(ms, undefined, { signal: ctx.signal });
  return ms;
}

export const outageChain = defineTask({
  name: 'outage-chain',
  version: 1,
  description: 'Three short steps across two resources (test type).',
  input: z.object({ label: z.string().min(1) }),
  firstStep: 'gather',
  steps: {
    gather: { resource: OUTAGE_RESOURCES[0] },
    weigh: { resource: OUTAGE_RESOURCES[1] },
    report: { resource: OUTAGE_RESOURCES[0] },
  },
  handlers: {
    gather: async (ctx) => {
      const ms = await work(ctx);
      return next('weigh', { gathered: ms }, { ms });
    },
    weigh: async (ctx) => {
      const ms = await work(ctx);
      return next('report', { weighed: ms }, { ms });
    },
    report: async (ctx) => {
      const ms = await work(ctx);
      return complete({ label: ctx.taskInput.label, ms });
    },
  },
});

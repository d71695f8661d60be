/**
 * The task type of the pool size end-to-end test, `ps-quick`: one step on `tool:pool` that
 * completes at once, so that a burst of tasks keeps every service's statements coming together.
 */
import { z } from 'zod';
import { complete, defineTask } from '@sluice/sdk';

export const POOL_RESOURCE = 'tool:pool';

export const psQuick = defineTask({
  name: 'ps-quick',
  version: 1,
  description: 'One step that completes at once: the pool size test type.',
  input: z.object({ n: z.number().int() }),
  firstStep: 'run',
  steps: { run: { resource: POOL_RESOURCE, timeoutMs: 10_000 } },
  handlers: { run: (ctx) => Promise.resolve(complete({ n: ctx.taskInput.n })) },
});

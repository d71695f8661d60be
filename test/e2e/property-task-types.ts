/**
 * Task types of the live lifecycle property test (its executor loads only these). Every step waits
 * at a latch of the test's latch server (`GET <latch>/latch/<task>:<step>`) until the test releases
 * it, so the test decides when a task moves on.
 * - `prop-flow`: `a` → `b`, which asks for approval (a long timeout: it never fires in the test),
 *   then `c` → complete. With a pause or cancel at any point, every row of the transition table
 *   but the failure rows is reachable.
 * - `prop-hold`: one latched step `hold`; the test uses it to occupy the executor's only slot, so
 *   that a `prop-flow` task stays `queued` (or its admitted step waits) until the test lets go.
 */
import { z } from 'zod';
import { awaitApproval, complete, defineTask, next } from '@sluice/sdk';

/** Where the steps find the latch server (set on the executors by the test). */
const LATCH_URL_VARIABLE = 'SLUICE_TEST_LATCH_URL';

/** The approval of `prop-flow` waits this long: far longer than any test sequence. */
export const PROP_FLOW_APPROVAL_TIMEOUT_MS = 10 * 60 * 1000;

/** The prompt `prop-flow` asks with. */
export const PROP_FLOW_PROMPT = 'Go on to step c?';

/** Blocks until the test releases latch `<task id>:<name>`, or the step's signal aborts. */
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

const noInput = z.object({});

export const propFlow = defineTask({
  name: 'prop-flow',
  version: 1,
  description: 'Latched a → latched b → approval → latched c (property test type).',
  input: z.object({ label: z.string().min(1) }),
  firstStep: 'a',
  steps: {
    a: { resource: 'tool:latch' },
    b: { resource: 'tool:latch', input: noInput },
    c: { resource: 'tool:latch', input: noInput },
  },
  handlers: {
    a: async (ctx) => {
      await waitAtLatch(ctx, 'a');
      return next('b', {});
    },
    b: async (ctx) => {
      await waitAtLatch(ctx, 'b');
      return awaitApproval({
        prompt: PROP_FLOW_PROMPT,
        timeoutMs: PROP_FLOW_APPROVAL_TIMEOUT_MS,
        onTimeout: 'pause',
        then: next('c', {}),
      });
    },
    c: async (ctx) => {
      await waitAtLatch(ctx, 'c');
      return complete({ label: ctx.taskInput.label });
    },
  },
});

export const propHold = defineTask({
  name: 'prop-hold',
  version: 1,
  description: 'One latched step that holds an executor slot (property test type).',
  input: noInput,
  firstStep: 'hold',
  steps: { hold: { resource: 'tool:latch' } },
  handlers: {
    hold: async (ctx) => {
      await waitAtLatch(ctx, 'hold');
      return complete({ held: true });
    },
  },
});

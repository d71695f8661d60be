import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { MAX_APPROVAL_TIMEOUT_MS, MAX_FAN_OUT_BRANCHES, type StepOutcome } from '@sluice/core';
import { defineTask } from './define-task.js';
import { awaitApproval, branch, complete, fanOut, next } from './step-result.js';
import {
  MAX_APPROVAL_PROMPT_CHARS,
  StepResultError,
  toStepOutcome,
  type StepResultOrigin,
} from './to-step-outcome.js';

const definition = defineTask({
  name: 'outcomes',
  version: 1,
  input: z.object({}),
  firstStep: 'plan',
  steps: {
    plan: { resource: 'llm', output: z.object({ plan: z.string() }) },
    fetch: {
      resource: 'tool:http',
      input: z.object({ url: z.string() }),
      output: z.object({ chars: z.number() }),
    },
    // A transform: the receiving step parses the raw input; the stored value must stay raw.
    count: { resource: 'llm', input: z.object({ text: z.string().transform((t) => t.length) }) },
    join: { resource: 'llm' },
  },
  handlers: {
    plan: () => complete({ plan: 'p' }),
    fetch: () => complete({ chars: 1 }),
    count: () => complete(null),
    join: () => complete(null),
  },
});

const fromPlan: StepResultOrigin = { definition, step: 'plan' };
const fromJoin: StepResultOrigin = { definition, step: 'join' };

/** The StepResultError message of mapping `result`, failing the test when it maps. */
function refusal(result: unknown, origin: StepResultOrigin = fromJoin): string {
  try {
    toStepOutcome(result, origin);
  } catch (error) {
    assert.ok(error instanceof StepResultError, `a StepResultError, got ${String(error)}`);
    assert.equal(error.errorClass, 'schema_validation');
    return error.message;
  }
  assert.fail('the result was accepted');
}

describe('toStepOutcome maps each result to the recorded outcome', () => {
  it('next, with this step’s output parsed and the target’s input kept raw', () => {
    const outcome = toStepOutcome(
      next('count', { text: 'four' }, { plan: 'p', dropped: true }),
      fromPlan,
    );
    assert.deepEqual(outcome, {
      type: 'next',
      step: 'count',
      input: { text: 'four' },
      output: { plan: 'p' },
    } satisfies StepOutcome);
  });

  it('an absent output is null', () => {
    assert.deepEqual(toStepOutcome(next('join', [1, 2]), fromJoin), {
      type: 'next',
      step: 'join',
      input: [1, 2],
      output: null,
    });
    assert.deepEqual(toStepOutcome(complete(), fromJoin), { type: 'complete', output: null });
  });

  it('fanOut, branches in order', () => {
    const outcome = toStepOutcome(
      fanOut([branch('fetch', { url: 'a' }), { step: 'fetch', input: { url: 'b' } }], 'join', {
        plan: 'p',
      }),
      fromPlan,
    );
    assert.deepEqual(outcome, {
      type: 'fanOut',
      branches: [
        { step: 'fetch', input: { url: 'a' } },
        { step: 'fetch', input: { url: 'b' } },
      ],
      join: 'join',
      output: { plan: 'p' },
    });
  });

  it('complete', () => {
    assert.deepEqual(toStepOutcome(complete({ chars: 3 }), { definition, step: 'fetch' }), {
      type: 'complete',
      output: { chars: 3 },
    });
  });

  it('awaitApproval, with its continuation', () => {
    const outcome = toStepOutcome(
      awaitApproval({
        prompt: 'Go?',
        timeoutMs: 60_000,
        onTimeout: 'cancel',
        then: fanOut([branch('fetch', { url: 'a' })], 'join'),
        output: { plan: 'p' },
      }),
      fromPlan,
    );
    assert.deepEqual(outcome, {
      type: 'awaitApproval',
      output: { plan: 'p' },
      prompt: 'Go?',
      timeoutMs: 60_000,
      onTimeout: 'cancel',
      then: { type: 'fanOut', branches: [{ step: 'fetch', input: { url: 'a' } }], join: 'join' },
    });
    const simple = toStepOutcome(
      awaitApproval({ prompt: 'Go?', timeoutMs: 1, onTimeout: 'pause', then: next('join', 1) }),
      fromJoin,
    );
    assert.deepEqual(simple, {
      type: 'awaitApproval',
      output: null,
      prompt: 'Go?',
      timeoutMs: 1,
      onTimeout: 'pause',
      then: { type: 'next', step: 'join', input: 1 },
    });
  });
});

describe('toStepOutcome refuses what cannot be recorded, naming it', () => {
  it('something that is not a result', () => {
    assert.match(refusal(undefined), /step join returned nothing; a handler returns next/);
    assert.match(refusal({ type: 'jump' }), /an object of type "jump"/);
    assert.match(refusal('done'), /a string/);
  });

  it('a result from a step the task does not declare', () => {
    assert.match(refusal(complete(1), { definition, step: 'ghost' }), /declares no such step/);
  });

  it('unknown step names', () => {
    assert.match(refusal(next('ghost', 1)), /next to "ghost", which is not a step of this task/);
    assert.match(refusal(fanOut([branch('ghost', 1)], 'join')), /branch 0 to "ghost"/);
    assert.match(refusal(fanOut([branch('join', 1)], 'ghost')), /joined by "ghost"/);
    assert.match(refusal({ type: 'next', step: 7, input: 1 }), /next to 7/);
  });

  it('inputs and outputs that do not match their schemas, with the path', () => {
    assert.match(
      refusal(next('fetch', { url: 42 })),
      /the input of next to fetch that does not match its schema: url: /,
    );
    assert.match(
      refusal(fanOut([branch('fetch', { url: 'a' }), branch('fetch', {})], 'join')),
      /the input of branch 1 to fetch that does not match its schema: url/,
    );
    assert.match(
      refusal(complete({ chars: 'many' }), { definition, step: 'fetch' }),
      /an output that does not match its schema: chars: /,
    );
    assert.match(refusal(next('join', 1), fromPlan), /an output that does not match its schema/);
  });

  it('values that are not JSON', () => {
    assert.match(refusal(complete({ at: new Date(0) })), /not JSON: \$\.at is a Date/);
    assert.match(refusal(next('join', { n: Number.NaN })), /not JSON: \$\.n is NaN/);
  });

  it('fan-outs out of bounds or nested', () => {
    assert.match(refusal(fanOut([], 'join')), /a fan-out of 0 branches; it needs 1 to/);
    const many = Array.from({ length: MAX_FAN_OUT_BRANCHES + 1 }, () => branch('join', null));
    assert.match(refusal(fanOut(many, 'join')), new RegExp(`${MAX_FAN_OUT_BRANCHES + 1} branches`));
    assert.equal(
      toStepOutcome(fanOut(many.slice(1), 'join'), fromJoin).type,
      'fanOut',
      'exactly the maximum is fine',
    );
    assert.match(
      refusal(fanOut([branch('join', 1)], 'join'), { definition, step: 'join', inBranch: true }),
      /cannot nest/,
    );
    assert.match(refusal({ type: 'fanOut', branches: 'all', join: 'join' }), /not an array/);
    assert.match(refusal({ type: 'fanOut', branches: [3], join: 'join' }), /branch 0 that is not/);
  });

  it('approvals out of bounds', () => {
    const approval = (overrides: Record<string, unknown>) => ({
      ...awaitApproval({
        prompt: 'Go?',
        timeoutMs: 1_000,
        onTimeout: 'pause',
        then: next('join', 1),
      }),
      ...overrides,
    });
    assert.match(refusal(approval({ prompt: '  ' })), /without a prompt/);
    assert.match(
      refusal(approval({}), { definition, step: 'join', inBranch: true }),
      /inside a fan-out branch/,
    );
    assert.match(
      refusal(approval({ prompt: 'x'.repeat(MAX_APPROVAL_PROMPT_CHARS + 1) })),
      /prompt longer than/,
    );
    // Characters, not UTF-16 units: each of these is two.
    assert.equal(
      toStepOutcome(approval({ prompt: '🛑'.repeat(MAX_APPROVAL_PROMPT_CHARS) }), fromJoin).type,
      'awaitApproval',
    );
    assert.match(
      refusal(approval({ prompt: '🛑'.repeat(MAX_APPROVAL_PROMPT_CHARS + 1) })),
      /prompt longer than/,
    );
    // Stored as jsonb with the outcome: one such prompt failed the whole group write of outcomes.
    assert.match(
      refusal(approval({ prompt: 'Go\u0000?' })),
      /prompt holding the character U\+0000/,
    );
    assert.match(refusal(approval({ prompt: 'Go \uD83D?' })), /prompt holding a lone UTF-16/);
    assert.match(refusal(approval({ timeoutMs: 0 })), /approval timeout of 0 ms/);
    assert.match(refusal(approval({ timeoutMs: 1.5 })), /approval timeout of 1.5 ms/);
    assert.match(
      refusal(approval({ timeoutMs: MAX_APPROVAL_TIMEOUT_MS + 1 })),
      /must be an integer from 1 to/,
    );
    assert.equal(
      toStepOutcome(approval({ timeoutMs: MAX_APPROVAL_TIMEOUT_MS }), fromJoin).type,
      'awaitApproval',
    );
    assert.match(refusal(approval({ onTimeout: 'fail' })), /onTimeout of fail/);
    assert.match(refusal(approval({ then: complete(1) })), /`then` is not next/);
    assert.match(refusal(approval({ then: next('join', 1, 'out') })), /output inside/);
    assert.match(refusal(approval({ then: next('ghost', 1) })), /"ghost"/);
  });
});

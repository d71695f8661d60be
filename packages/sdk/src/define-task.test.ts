import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import {
  MAX_STEP_TIMEOUT_MS,
  defineTask,
  isTaskDefinition,
  joinInput,
  repairInput,
  type TaskDefinition,
} from './define-task.js';
import { complete, next } from './step-result.js';

const input = z.object({ topic: z.string().min(1), limit: z.number().int().default(3) });

function twoSteps(): TaskDefinition<typeof input> {
  return defineTask({
    name: 'two-steps',
    version: 2,
    description: 'a then b',
    input,
    firstStep: 'a',
    steps: {
      a: { resource: 'llm', timeoutMs: 5_000, maxAttempts: 2 },
      b: { resource: 'tool:http', input: z.object({ url: z.string() }) },
    },
    handlers: {
      a: (ctx) => next('b', { url: ctx.taskInput.topic }),
      b: (ctx) => complete(ctx.input.url),
    },
  });
}

/** Calls defineTask with a spec as plain JavaScript might pass it, returning the error message. */
function problemsOf(spec: Record<string, unknown>): string {
  const base = {
    name: 'x',
    version: 1,
    input: z.object({}),
    firstStep: 'a',
    steps: { a: { resource: 'llm' } },
    handlers: { a: () => complete(null) },
  };
  try {
    (defineTask as (spec: unknown) => unknown)({ ...base, ...spec });
  } catch (error) {
    return (error as Error).message;
  }
  return '';
}

describe('defineTask', () => {
  it('merges each declaration with its handler, as executors run steps', () => {
    const definition = twoSteps();
    assert.equal(definition.kind, 'sluice.task-definition');
    assert.equal(definition.name, 'two-steps');
    assert.equal(definition.version, 2);
    assert.equal(definition.description, 'a then b');
    assert.equal(definition.firstStep, 'a');
    assert.deepEqual(Object.keys(definition.steps), ['a', 'b']);
    assert.equal(definition.steps.a?.resource, 'llm');
    assert.equal(definition.steps.a?.timeoutMs, 5_000);
    assert.equal(definition.steps.a?.maxAttempts, 2);
    assert.equal(typeof definition.steps.b?.run, 'function');
    assert.ok(definition.steps.b?.input);
    assert.ok(isTaskDefinition(definition));
    assert.ok(!isTaskDefinition({ name: 'two-steps' }));
  });

  it('registers the JSON Schema (draft 2020-12) of the input as clients send it', () => {
    const schema = twoSteps().inputJsonSchema;
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.equal(schema.type, 'object');
    // io: 'input' — a field with a default is optional for the client.
    assert.deepEqual(schema.required, ['topic']);
    assert.deepEqual((schema.properties as Record<string, unknown>).topic, {
      type: 'string',
      minLength: 1,
    });
  });

  it('names every problem of an invalid definition at once', () => {
    const message = problemsOf({
      name: 'Bad Name',
      version: 0,
      firstStep: 'missing',
      steps: {
        a: { resource: 'not a resource', timeoutMs: 0, maxAttempts: 1.5 },
        'bad name': { resource: 'llm' },
        c: { resource: 'llm', input: { parse: () => 1 } },
      },
      handlers: { a: () => complete(null), extra: () => complete(null) },
    });
    for (const expected of [
      'invalid task definition Bad Name',
      'version must be a positive integer',
      'step a: ',
      `timeoutMs must be an integer from 1 to ${MAX_STEP_TIMEOUT_MS}`,
      'maxAttempts must be an integer from 1 to 100',
      'step c: input must be a zod schema',
      'step bad name has no handler',
      'step c has no handler',
      'handler extra has no step declaration',
      'firstStep missing is not a step',
    ]) {
      assert.ok(message.includes(expected), `expected "${expected}" in: ${message}`);
    }
  });

  it('finds the handler of a step named like a method every object has', () => {
    // Inherited from Object.prototype, `handlers.toString` is a function of every object.
    const message = problemsOf({
      firstStep: 'toString',
      steps: { toString: { resource: 'llm' }, constructor: { resource: 'llm' } },
      handlers: {},
    });
    assert.match(message, /step toString has no handler/);
    assert.match(message, /step constructor has no handler/);
  });

  it('refuses a definition without steps, handlers or a zod input', () => {
    assert.match(problemsOf({ steps: {}, handlers: {} }), /at least one step/);
    assert.match(problemsOf({ handlers: undefined }), /handlers must be an object/);
    assert.match(problemsOf({ input: { type: 'object' } }), /input must be a zod schema/);
    assert.match(
      problemsOf({ steps: { a: { resource: 'llm', timeoutMs: MAX_STEP_TIMEOUT_MS + 1 } } }),
      /timeoutMs/,
    );
  });

  it('refuses an input schema that has no JSON Schema, since the gateway could not check it', () => {
    assert.match(
      problemsOf({ input: z.object({ at: z.date() }) }),
      /the input schema has no JSON Schema/,
    );
  });

  it('accepts a valid definition without complaint', () => {
    assert.equal(problemsOf({}), '');
  });

  it('accepts a repair step and a backoff, and keeps them on the step', () => {
    const definition = defineTask({
      name: 'repaired',
      version: 1,
      input: z.object({}),
      firstStep: 'draft',
      steps: {
        draft: {
          resource: 'llm',
          repairStep: 'fix',
          backoff: { baseDelayMs: 100, maxDelayMs: 400 },
        },
        fix: { resource: 'llm', input: repairInput() },
      },
      handlers: { draft: () => complete(null), fix: (ctx) => complete(ctx.input.repairOf) },
    });
    assert.equal(definition.steps['draft']?.repairStep, 'fix');
    assert.deepEqual(definition.steps['draft']?.backoff, { baseDelayMs: 100, maxDelayMs: 400 });
  });

  it('names the problems of a repair step or a backoff', () => {
    const table: Array<[Record<string, unknown>, string]> = [
      [{ a: { resource: 'llm', repairStep: 'nope' } }, 'step a: repairStep "nope" is not a step'],
      [{ a: { resource: 'llm', repairStep: 'a' } }, 'step a: a step cannot be its own repairStep'],
      [{ a: { resource: 'llm', repairStep: 3 } }, 'step a: repairStep 3 is not a step'],
      [{ a: { resource: 'llm', backoff: 100 } }, 'step a: backoff must be an object'],
      [
        { a: { resource: 'llm', backoff: { baseDelayMs: -1 } } },
        'step a: backoff.baseDelayMs must be an integer from 0 to 3600000',
      ],
      [{ a: { resource: 'llm', backoff: { jitter: 1 } } }, 'step a: backoff has no field jitter'],
    ];
    for (const [steps, expected] of table) {
      assert.ok(problemsOf({ steps }).includes(expected), `${JSON.stringify(steps)}: ${expected}`);
    }
  });

  it('keeps whileBreakerOpen on the step, and leaves it out when not declared (wait)', () => {
    const definition = defineTask({
      name: 'impatient',
      version: 1,
      input: z.object({}),
      firstStep: 'call',
      steps: {
        call: { resource: 'tool:search', whileBreakerOpen: 'fail' },
        patient: { resource: 'tool:search', whileBreakerOpen: 'wait' },
        plain: { resource: 'tool:search' },
      },
      handlers: {
        call: () => complete(null),
        patient: () => complete(null),
        plain: () => complete(null),
      },
    });
    assert.equal(definition.steps['call']?.whileBreakerOpen, 'fail');
    assert.equal(definition.steps['patient']?.whileBreakerOpen, 'wait');
    assert.equal(definition.steps['plain']?.whileBreakerOpen, undefined);
  });

  it('refuses a whileBreakerOpen that is neither wait nor fail', () => {
    for (const value of ['skip', true, null, 1]) {
      assert.ok(
        problemsOf({ steps: { a: { resource: 'llm', whileBreakerOpen: value } } }).includes(
          'step a: whileBreakerOpen must be one of "wait", "fail"',
        ),
        JSON.stringify(value),
      );
    }
  });
});

describe('repairInput', () => {
  it('is the shape of what a repair step receives', () => {
    const value = { repairOf: 'draft', input: { q: 1 }, result: null, error: 'bad' };
    assert.deepEqual(repairInput().parse(value), value);
    assert.equal(repairInput().safeParse({ repairOf: 'draft' }).success, false);
  });
});

describe('joinInput', () => {
  it('is the shape of a join step input: one output per branch', () => {
    const schema = joinInput(z.object({ n: z.number() }));
    assert.deepEqual(schema.parse({ outputs: [{ n: 1 }, { n: 2 }] }), {
      outputs: [{ n: 1 }, { n: 2 }],
    });
    assert.equal(schema.safeParse({ outputs: [{ n: 'x' }] }).success, false);
  });
});

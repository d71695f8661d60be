import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isGrpcError } from '../grpc/index.js';
import type { Json } from '@sluice/core';
import type { TaskTypeManifest } from '@sluice/db';
import { InputValidators, MAX_INPUT_DEPTH, parseInput } from './input-validation.js';

const LIMIT = 64 * 1024;

/** The error message `parseInput` answered `text` with, or undefined when it accepted it. */
function refusal(text: string, prefix?: string): string | undefined {
  const parsed = parseInput(text, LIMIT, prefix);
  return isGrpcError(parsed) ? parsed.message : undefined;
}

describe('parseInput', () => {
  it('answers the parsed value of valid JSON', () => {
    assert.deepEqual(parseInput('{"url":"https://example.com","n":[1,2]}', LIMIT), {
      url: 'https://example.com',
      n: [1, 2],
    });
  });

  it('refuses empty, oversized and invalid input, naming the field', () => {
    assert.match(refusal('  ') ?? '', /^input: input is required/);
    assert.match(refusal(`"${'x'.repeat(LIMIT)}"`) ?? '', /^input: input is \d+ bytes/);
    assert.match(
      refusal('{"a":', 'tasks[2].') ?? '',
      /^tasks\[2\]\.input: input is not valid JSON/,
    );
  });

  it('refuses nesting deeper than the limit', () => {
    const deep = '['.repeat(MAX_INPUT_DEPTH + 1) + ']'.repeat(MAX_INPUT_DEPTH + 1);
    assert.match(refusal(deep) ?? '', /nests deeper/);
    const deepest = '['.repeat(MAX_INPUT_DEPTH) + ']'.repeat(MAX_INPUT_DEPTH);
    assert.equal(refusal(deepest), undefined);
  });

  it('refuses nesting far deeper than the limit without overflowing the stack', () => {
    // 20 kB of brackets: JSON.parse builds it, a walk of it to the bottom overflowed the stack
    // (a RangeError, answered INTERNAL).
    for (const open of ['[', '{"a":']) {
      const depth = 10_000;
      const close = open === '[' ? ']' : '}';
      const text = open.repeat(depth) + '1' + close.repeat(depth);
      assert.match(refusal(text) ?? '', /nests deeper/);
    }
  });

  it('refuses U+0000 in a string or a key, wherever it is nested', () => {
    assert.match(refusal('{"a":"x\\u0000y"}') ?? '', /U\+0000/);
    assert.match(refusal('{"a":[{"b\\u0000":1}]}') ?? '', /U\+0000/);
  });

  it('refuses an unpaired surrogate in a string or a key, wherever it is nested', () => {
    assert.match(refusal('{"a":"x\\ud800y"}') ?? '', /unpaired UTF-16 surrogate/);
    assert.match(refusal('{"a":"x\\uDC00"}') ?? '', /unpaired UTF-16 surrogate/);
    assert.match(refusal('{"a":[{"b\\uDbFf":1}]}') ?? '', /unpaired UTF-16 surrogate/);
    assert.match(refusal('["\\ude00\\ud83d"]') ?? '', /unpaired UTF-16 surrogate/);
  });

  it('accepts surrogate pairs, raw or escaped, and text that only looks like the escape', () => {
    assert.deepEqual(parseInput('{"a":"\\ud83d\\ude00 😀"}', LIMIT), { a: '😀 😀' });
    assert.deepEqual(parseInput('{"a":"\\\\ud800"}', LIMIT), { a: '\\ud800' });
  });

  it('refuses a number too large for a double, which would be stored as null', () => {
    assert.match(refusal('{"a":1e400}') ?? '', /number too large/);
    assert.match(refusal('{"a":[{"b":-2E+308}]}') ?? '', /number too large/);
    assert.match(refusal(`[${'9'.repeat(310)}]`) ?? '', /number too large/);
  });

  it('refuses a number too large for a double from many digits and a short exponent', () => {
    // 1 followed by 250 zeros, times 10^99: 1e349, with a two-digit exponent and 251 digits.
    assert.match(refusal(`{"a":1${'0'.repeat(250)}e99}`) ?? '', /number too large/);
    assert.match(refusal(`[-${'9'.repeat(300)}.5E+9]`) ?? '', /number too large/);
  });

  it('accepts the largest doubles, tiny numbers and long digits in strings', () => {
    assert.deepEqual(parseInput('{"a":1.7976931348623157e308,"b":1e-400}', LIMIT), {
      a: Number.MAX_VALUE,
      b: 0,
    });
    assert.deepEqual(parseInput('{"a":"1e400"}', LIMIT), { a: '1e400' });
  });

  it('accepts text that only looks like the escape: an escaped backslash before u0000', () => {
    // The JSON text `"\\u0000"` is the six characters \u0000, not U+0000.
    assert.deepEqual(parseInput('{"a":"\\\\u0000"}', LIMIT), { a: '\\u0000' });
  });
});

describe('InputValidators', () => {
  const manifest = (inputSchema: Record<string, unknown>): TaskTypeManifest => ({
    name: 'report',
    version: 3,
    description: '',
    inputSchema,
    firstStep: 'run',
    steps: [],
  });
  const requiring = (field: string) => ({
    $id: 'https://example.test/report-input',
    type: 'object',
    required: [field],
  });
  const refusal = (validators: InputValidators, schema: Record<string, unknown>, input: Json) =>
    validators.check(manifest(schema), input)?.message;

  it('checks against the schema a version was registered with again, not the first one seen', () => {
    const validators = new InputValidators();
    assert.equal(refusal(validators, requiring('url'), { url: 'x' }), undefined);
    assert.match(refusal(validators, requiring('url'), {}) ?? '', /input\.url/);
    // The same version registered again with another schema (and the same $id, which Ajv alone
    // would refuse to compile twice).
    assert.match(refusal(validators, requiring('path'), { url: 'x' }) ?? '', /input\.path/);
    assert.equal(refusal(validators, requiring('path'), { path: 'x' }), undefined);
  });

  it('checks against an equal schema read anew (a new object with the same $id) many times', () => {
    const validators = new InputValidators();
    for (let read = 0; read < 3; read += 1) {
      assert.equal(refusal(validators, requiring('url'), { url: 'x' }), undefined);
      assert.match(refusal(validators, requiring('url'), {}) ?? '', /input\.url/);
    }
  });
});

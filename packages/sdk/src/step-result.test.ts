import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { awaitApproval, branch, complete, fanOut, next } from './step-result.js';

describe('result builders', () => {
  it('build plain result objects', () => {
    assert.deepEqual(next('b', { n: 1 }, 'out'), {
      type: 'next',
      step: 'b',
      input: { n: 1 },
      output: 'out',
    });
    assert.deepEqual(next('b', null), { type: 'next', step: 'b', input: null, output: undefined });
    assert.deepEqual(branch('b', 2), { step: 'b', input: 2 });
    assert.deepEqual(fanOut([branch('b', 1), branch('c', 2)], 'j'), {
      type: 'fanOut',
      branches: [
        { step: 'b', input: 1 },
        { step: 'c', input: 2 },
      ],
      join: 'j',
      output: undefined,
    });
    assert.deepEqual(complete({ done: true }), { type: 'complete', output: { done: true } });
    assert.deepEqual(
      awaitApproval({
        prompt: 'ok?',
        timeoutMs: 5,
        onTimeout: 'cancel',
        then: next('b', 1),
        output: 'o',
      }),
      {
        type: 'awaitApproval',
        prompt: 'ok?',
        timeoutMs: 5,
        onTimeout: 'cancel',
        then: { type: 'next', step: 'b', input: 1, output: undefined },
        output: 'o',
      },
    );
  });
});

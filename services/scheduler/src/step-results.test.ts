/**
 * Reading step results: an outcome the executor applied counts its attempt and asks for no pass;
 * any other (and a malformed one) asks for the pass.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeMessage } from '@sluice/bus';
import { createLogger } from '@sluice/telemetry';
import { appliedResourceOf } from './step-results.js';

const TASK = '0a9ffb9e-5b7e-4c1c-9a55-5d2a3c4b5e6f';
const log = createLogger({ service: 'step-results-test', level: 'silent' });

describe('appliedResourceOf', () => {
  it('reads an applied outcome: its attempt to count, nothing to apply', () => {
    const data = encodeMessage({
      type: 'step.result',
      task_id: TASK,
      step_seq: 1,
      applied: { resource: 'tool:http' },
    });
    assert.equal(appliedResourceOf('p.result', data, log), 'tool:http');
  });

  it('reads a recorded outcome as one to apply', () => {
    const data = encodeMessage({ type: 'step.result', task_id: TASK, step_seq: 2 });
    assert.equal(appliedResourceOf('p.result', data, log), undefined);
  });

  it('reads a malformed result as one to apply, so no wake-up is lost', () => {
    for (const data of [
      new TextEncoder().encode('not json'),
      new TextEncoder().encode(
        JSON.stringify({ type: 'step.result', task_id: TASK, step_seq: 1, applied: {} }),
      ),
      encodeMessage({ type: 'wake', reason: 'other' }),
    ]) {
      assert.equal(appliedResourceOf('p.result', data, log), undefined);
    }
  });
});

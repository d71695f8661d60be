import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalDecision, type GovernorDecision } from '@sluice/bus';
import { waitingReason } from './waiting-reason.js';

const under = (fields: Partial<GovernorDecision>): GovernorDecision => ({
  ...normalDecision(1, 'g'),
  reasons: ['llm_rate_limit llm = 0.400 → hold p3', 'breaker tool:x open'],
  ...fields,
});

describe('waitingReason', () => {
  it('says nothing without a governor decision that concerns the step', () => {
    assert.equal(waitingReason(normalDecision(1, 'g'), 3, 'llm'), '');
    assert.equal(waitingReason(under({ holds: [3] }), 2, 'llm'), '');
  });

  it('names an open or half-open breaker of the step resource first', () => {
    const decision = under({ holds: [3], breakers: { 'tool:x': 'open', 'tool:y': 'half_open' } });
    assert.match(waitingReason(decision, 3, 'tool:x'), /circuit breaker of tool:x is open/);
    assert.match(waitingReason(decision, 0, 'tool:y'), /tool:y is half-open/);
  });

  it('names the urgent-wait guard holding or capping lower priorities, never for P0', () => {
    assert.equal(
      waitingReason(undefined, 3, 'llm', 0),
      'P0 steps on llm wait longer than their target: lower priorities are held there until they catch up',
    );
    assert.equal(
      waitingReason(normalDecision(1, 'g'), 1, 'llm', 1),
      'P0 steps on llm wait longer than their target: lower priorities may have only 1 step in flight there until they catch up',
    );
    assert.match(waitingReason(undefined, 2, 'llm', 5), /only 5 steps in flight/);
    assert.equal(waitingReason(undefined, 0, 'llm', 0), '');
    assert.equal(waitingReason(undefined, 3, 'llm'), '');
  });

  it('puts an open breaker and a governor hold before the guard, the guard before a throttle', () => {
    const decision = under({ holds: [3], throttle: [2], breakers: { 'tool:x': 'open' } });
    assert.match(waitingReason(decision, 3, 'tool:x', 0), /circuit breaker of tool:x is open/);
    assert.match(waitingReason(decision, 3, 'llm', 0), /P3 is held by the governor/);
    assert.match(waitingReason(decision, 2, 'llm', 0), /P0 steps on llm wait longer/);
    assert.match(waitingReason(decision, 2, 'llm'), /P2 is throttled by the governor/);
  });

  it('names a hold or a throttle of the priority with its cause', () => {
    assert.equal(
      waitingReason(under({ holds: [3] }), 3, 'llm'),
      'P3 is held by the governor under load (llm_rate_limit llm = 0.400 → hold p3); the task stays queued',
    );
    assert.match(
      waitingReason(under({ throttle: [2] }), 2, 'llm'),
      /P2 is throttled by the governor/,
    );
  });
});

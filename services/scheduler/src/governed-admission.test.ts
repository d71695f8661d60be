import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalDecision, type DecisionView, type GovernorDecision } from '@sluice/bus';
import { createGovernedAdmission } from './governed-admission.js';

const base = { defaultResourceLimit: 64, agingMs: 30_000, throttleReserve: 0.25 };

function viewOf(decision: GovernorDecision): DecisionView {
  return { current: () => decision, isStale: () => false, stop: () => undefined };
}

describe('createGovernedAdmission', () => {
  it('uses the configured admission alone without a governor', () => {
    assert.equal(createGovernedAdmission({ base }).settings(), base);
  });

  it('turns holds, throttles, open breakers and limits into claim settings', () => {
    const decision: GovernorDecision = {
      ...normalDecision(3, 'g'),
      holds: [3],
      throttle: [2],
      limits: { llm: 5, 'tool:a': 2 },
      breakers: { 'tool:a': 'half_open', 'tool:b': 'open' },
    };
    const settings = createGovernedAdmission({ base, view: viewOf(decision) }).settings();
    assert.deepEqual(settings.heldPriorities, [3]);
    assert.deepEqual(settings.throttledPriorities, [2]);
    assert.equal(settings.throttleReserve, 0.25, 'the configured reserve is kept');
    assert.deepEqual(settings.closedResources, ['tool:b']);
    assert.deepEqual(settings.resourceLimits, { llm: 5, 'tool:a': 2 });
  });
});

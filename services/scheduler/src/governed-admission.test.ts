import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normalDecision, type DecisionView, type GovernorDecision } from '@sluice/bus';
import type { ClaimedStep } from '@sluice/db';
import { createGovernedAdmission } from './governed-admission.js';

const base = { defaultResourceLimit: 64, agingMs: 30_000 };

function viewOf(decision: GovernorDecision): DecisionView {
  return { current: () => decision, isStale: () => false, stop: () => undefined };
}

const step = (priority: 0 | 1 | 2 | 3): ClaimedStep => ({
  id: 1,
  taskId: 't',
  seq: 1,
  name: 's',
  resource: 'llm',
  tenantId: 'acme',
  priority,
  dispatch: 1,
  traceParent: null,
});

describe('createGovernedAdmission', () => {
  it('uses the configured admission alone without a governor', () => {
    assert.equal(createGovernedAdmission({ base, throttlePerSecond: 5 }).settings(), base);
  });

  it('turns holds, open breakers and limits into claim settings', () => {
    const decision: GovernorDecision = {
      ...normalDecision(3, 'g'),
      holds: [2, 3],
      limits: { llm: 5, 'tool:a': 2 },
      breakers: { 'tool:a': 'half_open', 'tool:b': 'open' },
    };
    const settings = createGovernedAdmission({
      base,
      view: viewOf(decision),
      throttlePerSecond: 5,
    }).settings();
    assert.deepEqual(settings.heldPriorities, [2, 3]);
    assert.deepEqual(settings.closedResources, ['tool:b']);
    assert.deepEqual(settings.resourceLimits, { llm: 5, 'tool:a': 2 });
    assert.deepEqual(settings.priorityCaps, {});
  });

  it('admits a throttled priority at its rate: spends tokens, refills with time', () => {
    let nowMs = 0;
    const admission = createGovernedAdmission({
      base,
      view: viewOf({ ...normalDecision(1, 'g'), throttle: [3] }),
      throttlePerSecond: 4,
      now: () => nowMs,
    });
    assert.deepEqual(admission.settings().priorityCaps, { 3: 4 });
    admission.claimed([step(3), step(3), step(3), step(0)]);
    assert.deepEqual(admission.settings().priorityCaps, { 3: 1 });
    admission.claimed([step(3)]);
    assert.deepEqual(admission.settings().priorityCaps, { 3: 0 });
    nowMs = 500;
    assert.deepEqual(admission.settings().priorityCaps, { 3: 2 });
    nowMs = 60_000;
    assert.deepEqual(admission.settings().priorityCaps, { 3: 4 }, 'a second of tokens at most');
  });
});

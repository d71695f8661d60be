import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDecision } from '@sluice/bus';
import { composeDecision, type DecisionInputs } from './compose-decision.js';

const calm: DecisionInputs = {
  epoch: 2,
  holder: 'g',
  at: new Date('2026-01-01T00:00:00Z'),
  actions: {
    level: 'normal',
    throttle: [],
    degrade: [],
    holds: [],
    reject: [],
    reasons: [],
    rejectOverload: 0,
  },
  readings: [{ signal: 'queue_depth', scope: 'all', value: 3, level: 'normal' }],
  breakers: {},
  halfOpenProbes: 2,
  adaptiveLimits: { llm: 7 },
  overrides: [],
  retryAfterBaseMs: 5_000,
};

describe('composeDecision', () => {
  it('admits everything without pressure, carrying the adaptive limits and readings', () => {
    const decision = composeDecision(calm);
    assert.equal(decision.level, 'normal');
    assert.deepEqual(decision.limits, { llm: 7 });
    assert.deepEqual(decision.reasons, ['no pressure']);
    assert.equal(decision.signals?.length, 1);
    assert.deepEqual(parseDecision(decision), decision, 'a valid document');
  });

  it('scales the retry delay with the overload and bounds it', () => {
    const rejecting = {
      ...calm,
      actions: {
        ...calm.actions,
        level: 'reject' as const,
        reject: [2, 3] as const,
        rejectOverload: 3,
      },
    };
    assert.equal(composeDecision(rejecting).retry_after_ms, 15_000);
    assert.equal(
      composeDecision({ ...rejecting, actions: { ...rejecting.actions, rejectOverload: 100 } })
        .retry_after_ms,
      60_000,
    );
  });

  it('limits a half-open breaker to its probes and lets overrides win', () => {
    const decision = composeDecision({
      ...calm,
      actions: { ...calm.actions, level: 'hold_p3', holds: [3], throttle: [2] },
      breakers: { 'tool:a': 'half_open', 'tool:b': 'open' },
      overrides: [
        { kind: 'breaker', target: 'tool:b', value: 'closed' },
        { kind: 'breaker', target: 'tool:c', value: 'open' },
        { kind: 'limit', target: 'llm', value: '3' },
        { kind: 'priority', target: '3', value: 'release' },
        { kind: 'priority', target: '1', value: 'hold' },
      ],
    });
    assert.deepEqual(decision.breakers, { 'tool:a': 'half_open', 'tool:c': 'open' });
    assert.deepEqual(decision.limits, { llm: 3, 'tool:a': 2 });
    assert.deepEqual(decision.holds, [1]);
    assert.deepEqual(decision.throttle, [2]);
    assert.ok(decision.reasons.includes('override: priority 1 hold'));
  });
});

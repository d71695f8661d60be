/**
 * The dispatcher's memory of full resources, which lets a created task's wake-up skip an admission
 * pass that could admit nothing; and the reading of the wake-up that names the task's first step.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeMessage } from '@sluice/bus';
import { createCapturingLogger } from '@sluice/telemetry/testing';
import { FullResources, readyStepOf } from './full-resources.js';

describe('full resources', () => {
  it('skips a new non-P0 step of a resource the last pass found full, and nothing else', () => {
    const full = new FullResources();
    const llm = { resource: 'llm', priority: 2 } as const;
    assert.equal(full.admitsNothingFor(llm), false, 'before any pass, every wake-up looks');
    full.seen(['llm', 'browser']);
    assert.equal(full.admitsNothingFor(llm), true);
    assert.equal(full.admitsNothingFor({ resource: 'llm', priority: 3 }), true);
    assert.equal(
      full.admitsNothingFor({ resource: 'llm', priority: 0 }),
      false,
      'the urgent reserve may hold a slot for a P0 step',
    );
    assert.equal(full.admitsNothingFor({ resource: 'tool', priority: 2 }), false, 'not full');
    full.seen(['browser']);
    assert.equal(full.admitsNothingFor(llm), false, 'the next pass found room: forgotten');
  });
});

describe('the step a wake-up names', () => {
  const { log, lines: logged } = createCapturingLogger('full-resources-test', 'warn');

  it('reads the resource and priority of a created task’s first step', () => {
    const data = encodeMessage({
      type: 'wake',
      reason: 'task.created',
      step: { resource: 'tool:http', priority: 1 },
    });
    assert.deepEqual(readyStepOf('wake.dispatch', data, log), {
      resource: 'tool:http',
      priority: 1,
    });
    assert.equal(
      readyStepOf('wake.dispatch', encodeMessage({ type: 'wake', reason: 'old gateway' }), log),
      undefined,
    );
  });

  it('reads a malformed wake-up as naming no step, and says so in the log', () => {
    const data = new TextEncoder().encode(
      JSON.stringify({ type: 'wake', reason: 'x', step: { resource: 'tool:http', priority: 9 } }),
    );
    assert.equal(readyStepOf('wake.dispatch', data, log), undefined);
    assert.match(logged.join(''), /malformed wake-up/);
  });
});

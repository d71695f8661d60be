/**
 * When a step's result (a freed slot) starts an admission pass: only after a pass that left due
 * ready steps waiting, and, for a result that arrives during a pass, by what that pass left.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FreedSlots } from './freed-slots.js';

const nothingLeft = { full: [], leftBehind: false };

describe('freed slots', () => {
  it('wake the dispatcher before any pass, and after one that left steps waiting', () => {
    const slots = new FreedSlots();
    assert.equal(slots.slotFreed(), true, 'nothing known yet');
    slots.passStarted();
    slots.passEnded({ full: [], leftBehind: true });
    assert.equal(slots.slotFreed(), true, 'a limit or the batch kept steps back');
    slots.passStarted();
    slots.passEnded({ full: ['llm'], leftBehind: false });
    assert.equal(slots.slotFreed(), true, 'steps wait for a slot of a full resource');
  });

  it('do not after a pass that took every due ready step', () => {
    const slots = new FreedSlots();
    slots.passStarted();
    assert.equal(slots.passEnded(nothingLeft), false);
    assert.equal(slots.slotFreed(), false);
    assert.equal(slots.slotFreed(), false);
  });

  it('wake it after a failed pass: nothing is known', () => {
    const slots = new FreedSlots();
    slots.passStarted();
    slots.passEnded(nothingLeft);
    slots.passStarted();
    slots.passEnded(undefined);
    assert.equal(slots.slotFreed(), true);
  });

  it('judge a slot freed during a pass by that pass: another pass only if it left steps', () => {
    const slots = new FreedSlots();
    slots.passStarted();
    slots.passEnded({ full: [], leftBehind: true });
    slots.passStarted();
    assert.equal(slots.slotFreed(), false, 'not now: the pass under way decides');
    assert.equal(slots.passEnded({ full: [], leftBehind: true }), true, 'go again at once');
    slots.passStarted();
    assert.equal(slots.slotFreed(), false);
    assert.equal(slots.passEnded(nothingLeft), false, 'it took everything: no pass');
    slots.passStarted();
    assert.equal(slots.passEnded({ full: ['llm'], leftBehind: false }), false, 'no slot freed');
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { urgentReserveSlots } from '@sluice/core';
import { Slots } from './slots.js';

describe('Slots', () => {
  it('hands out at most its capacity and takes back what was given', () => {
    const slots = new Slots(2);
    assert.equal(slots.tryTake(false), true);
    assert.equal(slots.tryTake(true), true);
    assert.equal(slots.free, 0);
    assert.equal(slots.tryTake(true), false);
    assert.equal(slots.tryTake(false), false);
    slots.release();
    assert.equal(slots.inUse, 1);
    assert.equal(slots.tryTake(false), true);
    slots.release();
    slots.release();
    assert.equal(slots.inUse, 0);
    assert.throws(() => slots.release(), /not taken/);
  });

  it('starts lower priorities only while more than the reserve is free; P0 in any slot', () => {
    const slots = new Slots(4, 1);
    for (let i = 0; i < 3; i += 1) assert.equal(slots.tryTake(false), true);
    // One slot is free, but it is the reserve: lower priorities wait, P0 takes it.
    assert.equal(slots.free, 1);
    assert.equal(slots.canTake(false), false);
    assert.equal(slots.tryTake(false), false);
    assert.equal(slots.tryTake(true), true);
    assert.equal(slots.free, 0);
    // While P0 holds the reserve, a lower priority needs two free slots, not one.
    slots.release();
    assert.equal(slots.tryTake(false), false);
    slots.release();
    assert.equal(slots.tryTake(false), true);
    // P0 may take every slot.
    const urgent = new Slots(3, 1);
    for (let i = 0; i < 3; i += 1) assert.equal(urgent.tryTake(true), true);
    assert.equal(urgent.tryTake(true), false);
  });

  it('refuses a reserve that would leave lower priorities nothing', () => {
    assert.throws(() => new Slots(2, 2), RangeError);
    assert.throws(() => new Slots(2, -1), RangeError);
  });
});

describe('urgentReserveSlots', () => {
  it('is the percent of the capacity rounded down, never all of it', () => {
    assert.equal(urgentReserveSlots(16, 10), 1);
    assert.equal(urgentReserveSlots(64, 10), 6);
    assert.equal(urgentReserveSlots(9, 10), 0);
    assert.equal(urgentReserveSlots(8, 0), 0);
    assert.equal(urgentReserveSlots(1, 50), 0);
    assert.equal(urgentReserveSlots(2, 50), 1);
    assert.equal(urgentReserveSlots(3, 50), 1);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Slots } from './slots.js';

describe('Slots', () => {
  it('hands out at most its capacity and wakes waiters in order', async () => {
    const slots = new Slots(2);
    await slots.acquire();
    await slots.acquire();
    assert.equal(slots.free, 0);
    const order: number[] = [];
    const first = slots.acquire().then(() => order.push(1));
    const second = slots.acquire().then(() => order.push(2));
    await Promise.resolve();
    assert.deepEqual(order, []);
    slots.release();
    await first;
    assert.deepEqual(order, [1]);
    assert.equal(slots.inUse, 2);
    slots.release();
    await second;
    assert.deepEqual(order, [1, 2]);
    slots.release();
    slots.release();
    assert.equal(slots.inUse, 0);
  });
});

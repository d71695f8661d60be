import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Waker } from './timers.js';

describe('Waker', () => {
  it('says whether a wait ended by a wake-up or ran out', async () => {
    const waker = new Waker();
    assert.equal(await waker.wait(1), false, 'ran out');

    const woken = waker.wait(60_000);
    waker.wake();
    assert.equal(await woken, true, 'woken while waiting');

    waker.wake();
    assert.equal(waker.hasWakeUp, true);
    assert.equal(await waker.wait(60_000), true, 'a wake-up before the wait counts');
    assert.equal(waker.hasWakeUp, false);
  });
});

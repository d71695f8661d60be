import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_BREAKER, type BreakerConfig, type BreakerState } from '@sluice/core';
import { BreakerKeeper, evenlyMixed, type BreakerStore } from './breaker-keeper.js';

const config: BreakerConfig = {
  ...DEFAULT_BREAKER,
  consecutiveFailures: 3,
  coolDownMs: 1_000,
  probes: 1,
  successesToClose: 2,
};

class MemoryStore implements BreakerStore {
  readonly saved = new Map<string, BreakerState>();
  readonly transitions: string[] = [];
  fenced = false;
  load() {
    return Promise.resolve([...this.saved].map(([resource, state]) => ({ resource, state })));
  }
  save(resource: string, state: BreakerState, transition?: { from: string; to: string }) {
    if (this.fenced) return Promise.resolve(false);
    this.saved.set(resource, state);
    if (transition) this.transitions.push(`${resource}: ${transition.from}→${transition.to}`);
    return Promise.resolve(true);
  }
}

describe('BreakerKeeper', () => {
  it('opens on failures, half-opens after the cool-down, closes on probe successes', async () => {
    const store = new MemoryStore();
    const keeper = new BreakerKeeper(config, store);
    await keeper.load();
    await keeper.tick(new Map([['tool:x', { succeeded: 2, failed: 1 }]]), 0);
    await keeper.tick(new Map([['tool:x', { succeeded: 0, failed: 1 }]]), 0);
    assert.deepEqual(keeper.views(), {}, 'two failures in a row');
    await keeper.tick(new Map([['tool:x', { succeeded: 0, failed: 1 }]]), 0);
    assert.deepEqual(keeper.views(), { 'tool:x': 'open' }, 'three across ticks');
    assert.deepEqual(await keeper.tick(new Map(), 999), []);
    assert.deepEqual(keeper.views(), { 'tool:x': 'open' }, 'still cooling down');
    await keeper.tick(new Map(), 1_000);
    assert.deepEqual(keeper.views(), { 'tool:x': 'half_open' });
    await keeper.tick(new Map([['tool:x', { succeeded: 2, failed: 0 }]]), 1_100);
    assert.deepEqual(keeper.views(), {});
    assert.deepEqual(store.transitions, [
      'tool:x: closed→open',
      'tool:x: open→half_open',
      'tool:x: half_open→closed',
    ]);
  });

  it('reopens when a probe fails, and a new leader resumes from the store', async () => {
    const store = new MemoryStore();
    const first = new BreakerKeeper(config, store);
    await first.load();
    await first.tick(new Map([['mcp:files', { succeeded: 0, failed: 3 }]]), 0);
    await first.tick(new Map(), 1_000);
    const second = new BreakerKeeper(config, store);
    await second.load();
    assert.deepEqual(second.views(), { 'mcp:files': 'half_open' });
    await second.tick(new Map([['mcp:files', { succeeded: 0, failed: 1 }]]), 1_500);
    assert.deepEqual(second.views(), { 'mcp:files': 'open' });
    assert.equal(second.get('mcp:files').coolDownUntilMs, 2_500);
  });

  it('reads the outcomes of the tick its cool-down ends in as the open period’s, not as probes', async () => {
    const store = new MemoryStore();
    const keeper = new BreakerKeeper(config, store);
    await keeper.tick(new Map([['tool:x', { succeeded: 0, failed: 3 }]]), 0);
    assert.deepEqual(keeper.views(), { 'tool:x': 'open' });
    // A step that was running when it opened fails late, before the cool-down ends; the tick that
    // ends the cool-down is the first to hear of it. No probe has run: half-open is not published.
    await keeper.tick(new Map([['tool:x', { succeeded: 0, failed: 1 }]]), 1_000);
    assert.deepEqual(keeper.views(), { 'tool:x': 'half_open' }, 'the late failure reopens nothing');
    const store2 = new MemoryStore();
    const other = new BreakerKeeper(config, store2);
    await other.tick(new Map([['tool:y', { succeeded: 0, failed: 3 }]]), 0);
    await other.tick(new Map([['tool:y', { succeeded: 2, failed: 0 }]]), 1_000);
    assert.deepEqual(other.views(), { 'tool:y': 'half_open' }, 'nor do late successes close it');
  });

  it('reads a tick of a few failures among many successes as a steady error rate, not a streak', async () => {
    const store = new MemoryStore();
    const keeper = new BreakerKeeper(config, store);
    // 5 % of 100 calls a second failing, for a minute: never three in a row, never half failing.
    for (let second = 0; second < 60; second++) {
      await keeper.tick(new Map([['tool:x', { succeeded: 95, failed: 5 }]]), second * 1_000);
    }
    assert.deepEqual(keeper.views(), {});
    assert.deepEqual(store.transitions, []);
    // Failures that outnumber the successes in a tick still run together.
    await keeper.tick(new Map([['tool:x', { succeeded: 1, failed: 6 }]]), 60_000);
    assert.deepEqual(keeper.views(), { 'tool:x': 'open' });
  });

  it('mixes a tick’s outcomes evenly: failures run together only where they outnumber successes', () => {
    const shape = (succeeded: number, failed: number) =>
      evenlyMixed(succeeded, failed)
        .map((ok) => (ok ? 'S' : 'F'))
        .join('');
    assert.equal(shape(2, 3), 'FSFSF');
    assert.equal(shape(1, 4), 'FFSFF');
    assert.equal(shape(0, 3), 'FFF');
    assert.equal(shape(3, 0), 'SSS');
    assert.equal(shape(0, 0), '');
    const mixed = evenlyMixed(95, 5);
    assert.equal(mixed.filter((ok) => !ok).length, 5);
    assert.equal(mixed.length, 100);
    assert.doesNotMatch(shape(95, 5), /FF/);
  });

  it('ignores resources without breakers and says when it was fenced out', async () => {
    const store = new MemoryStore();
    const keeper = new BreakerKeeper(config, store);
    await keeper.tick(new Map([['llm', { succeeded: 0, failed: 10 }]]), 0);
    assert.deepEqual(keeper.views(), {});
    store.fenced = true;
    assert.equal(
      await keeper.tick(new Map([['tool:y', { succeeded: 1, failed: 0 }]]), 0),
      undefined,
    );
  });
});

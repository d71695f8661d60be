/**
 * The group reader without a database: an idle reader reads at once; keys asked for during a read
 * go together in the next, each distinct key once, and only after they were asked for; a key not
 * found answers `undefined`; a failed read fails the keys it held, and later ones read as usual.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GroupReader } from './group-reader.js';

/** A read whose calls are seen, and which answers each when the test says so. */
function controlledRead() {
  const calls: Array<{
    keys: string[];
    answer: (found: Record<string, number>) => void;
    fail: (error: unknown) => void;
  }> = [];
  const read = (keys: string[]) =>
    new Promise<ReadonlyMap<string, number>>((resolve, fail) =>
      calls.push({ keys, answer: (found) => resolve(new Map(Object.entries(found))), fail }),
    );
  return { calls, read };
}

/** Lets the reader's promise chains run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('GroupReader', () => {
  it('reads a key at once when nothing is being read', async () => {
    const { calls, read } = controlledRead();
    const reader = new GroupReader(read);
    const value = reader.read('a');
    await settle();
    assert.deepEqual(calls[0]?.keys, ['a']);
    calls[0]?.answer({ a: 1 });
    assert.equal(await value, 1);
  });

  it('reads the keys asked for during a read together in the next, each once', async () => {
    const { calls, read } = controlledRead();
    const reader = new GroupReader(read);
    const first = reader.read('a');
    await settle();
    const later = ['b', 'a', 'c', 'b'].map((key) => reader.read(key));
    await settle();
    assert.equal(
      calls.length,
      1,
      'the others wait for the read under way, which began before them',
    );
    calls[0]?.answer({ a: 1 });
    await settle();
    assert.deepEqual(calls[1]?.keys, ['b', 'a', 'c']);
    calls[1]?.answer({ a: 10, b: 20 });
    assert.equal(await first, 1);
    assert.deepEqual(await Promise.all(later), [20, 10, undefined, 20]);
  });

  it('fails the keys of a failed read only', async () => {
    const { calls, read } = controlledRead();
    const reader = new GroupReader(read);
    const failed = reader.read('a');
    await settle();
    const failure = new Error('connection lost');
    calls[0]?.fail(failure);
    await assert.rejects(failed, failure);
    const after = reader.read('a');
    await settle();
    calls[1]?.answer({ a: 2 });
    assert.equal(await after, 2);
  });
});

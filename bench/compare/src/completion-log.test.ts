import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CompletionLog } from './completion-log.js';

describe('CompletionLog', () => {
  it('answers at once when every id already completed, first completion kept', async () => {
    const log = new CompletionLog();
    log.record('a', 10);
    log.record('a', 20);
    log.record('b', 30);
    assert.deepEqual(
      [...(await log.completions(['a', 'b'], 1_000))],
      [
        ['a', 10],
        ['b', 30],
      ],
    );
  });

  it('waits for completions still to come', async () => {
    const log = new CompletionLog();
    const pending = log.completions(['a', 'b'], 5_000);
    setTimeout(() => log.record('a', 1), 5);
    setTimeout(() => log.record('b', 2), 10);
    assert.equal((await pending).size, 2);
  });

  it('leaves out ids not seen within the timeout', async () => {
    const log = new CompletionLog();
    log.record('a', 1);
    const found = await log.completions(['a', 'never'], 20);
    assert.deepEqual([...found.keys()], ['a']);
  });

  it('releases its hold once, and records nothing after', async () => {
    let released = 0;
    const log = new CompletionLog(() => {
      released += 1;
    });
    await log.stop();
    await log.stop();
    log.record('late', 1);
    assert.equal(released, 1);
    assert.equal((await log.completions(['late'], 1)).size, 0);
  });
});

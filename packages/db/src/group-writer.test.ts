/**
 * The group writer without a database: an idle writer writes at once, items that arrive during a
 * write go together in the next (up to the most per write, never two of one exclusive key), a
 * deadlock is tried again and another failure fails only its own batch.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { OutcomeToRecord } from './queries/step-outcomes.js';
import { GroupWriter } from './group-writer.js';

const ref = (seq: number) => ({ taskId: 't', seq, dispatch: 1 });
const done = { type: 'complete', output: null } as const;

/** A writer whose calls are seen, and which answers each when the test says so. */
function controlledWriter() {
  const calls: Array<{
    items: OutcomeToRecord[];
    answer: (recorded: boolean[]) => void;
    fail: (error: unknown) => void;
  }> = [];
  const writer = (items: OutcomeToRecord[]) =>
    new Promise<boolean[]>((answer, fail) => calls.push({ items, answer, fail }));
  return { calls, writer };
}

/** Outcomes to record, as the executor group-commits them. */
class OutcomeRecorder extends GroupWriter<OutcomeToRecord, boolean> {
  record(r: OutcomeToRecord['ref'], outcome: OutcomeToRecord['outcome']): Promise<boolean> {
    return this.write({ ref: r, outcome });
  }
}

/** Lets the writer's promise chains run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('GroupWriter', () => {
  it('writes an outcome at once when nothing is being written', async () => {
    const { calls, writer } = controlledWriter();
    const recorder = new OutcomeRecorder(writer);
    const recorded = recorder.record(ref(1), done);
    await settle();
    assert.equal(calls.length, 1);
    assert.deepEqual(calls[0]?.items, [{ ref: ref(1), outcome: done }]);
    calls[0]?.answer([true]);
    assert.equal(await recorded, true);
  });

  it('gathers the outcomes that finish during a write into the next one', async () => {
    const { calls, writer } = controlledWriter();
    const recorder = new OutcomeRecorder(writer, 3);
    const first = recorder.record(ref(1), done);
    await settle();
    const later = [2, 3, 4, 5].map((seq) => recorder.record(ref(seq), done));
    await settle();
    assert.equal(calls.length, 1, 'the others wait for the write in flight');
    calls[0]?.answer([true]);
    await settle();
    assert.equal(calls.length, 2);
    assert.deepEqual(
      calls[1]?.items.map((i) => i.ref.seq),
      [2, 3, 4],
      'together, up to the most per write',
    );
    calls[1]?.answer([true, false, true]);
    await settle();
    assert.deepEqual(
      calls[2]?.items.map((i) => i.ref.seq),
      [5],
    );
    calls[2]?.answer([true]);
    assert.equal(await first, true);
    assert.deepEqual(await Promise.all(later), [true, false, true, true]);
  });

  it('tries a write again after a deadlock, and fails only its own outcomes on another error', async () => {
    const { calls, writer } = controlledWriter();
    const recorder = new OutcomeRecorder(writer);
    const deadlocked = recorder.record(ref(1), done);
    await settle();
    calls[0]?.fail(Object.assign(new Error('deadlock detected'), { code: '40P01' }));
    await settle();
    assert.equal(calls.length, 2, 'tried again');
    const broken = recorder.record(ref(2), done);
    calls[1]?.answer([true]);
    assert.equal(await deadlocked, true);
    await settle();
    const failure = new Error('connection lost');
    calls[2]?.fail(failure);
    await assert.rejects(broken, failure);
    const after = recorder.record(ref(3), done);
    await settle();
    calls[3]?.answer([true]);
    assert.equal(await after, true, 'later outcomes are written as usual');
  });

  it('keeps items of one exclusive key in separate writes, in arrival order, and says when idle', async () => {
    const calls: Array<{ items: string[]; answer: () => void }> = [];
    const writer = new GroupWriter<string, string>(
      (items) =>
        new Promise((resolve) =>
          calls.push({ items, answer: () => resolve(items.map((item) => `wrote ${item}`)) }),
        ),
      10,
      (item) => (item.startsWith('-') ? undefined : item.slice(0, 1)),
    );
    assert.equal(writer.idle, true);
    const first = writer.write('a1');
    await settle();
    assert.equal(writer.idle, false);
    const later = ['a2', 'b1', '-x', 'a3', '-y', 'b2', 'c1'].map((item) => writer.write(item));
    await settle();
    calls[0]?.answer();
    await settle();
    assert.deepEqual(
      calls[1]?.items,
      ['a2', 'b1', '-x', '-y', 'c1'],
      'one of each key, keyless ones all',
    );
    calls[1]?.answer();
    await settle();
    assert.deepEqual(calls[2]?.items, ['a3', 'b2'], 'the ones left over, in the order they came');
    calls[2]?.answer();
    assert.equal(await first, 'wrote a1');
    assert.deepEqual(await Promise.all(later), [
      'wrote a2',
      'wrote b1',
      'wrote -x',
      'wrote a3',
      'wrote -y',
      'wrote b2',
      'wrote c1',
    ]);
    assert.equal(writer.idle, true);
  });
});

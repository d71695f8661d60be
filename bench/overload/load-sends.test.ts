/**
 * The load phase's creates: the P3 flood and the P0 stream. A create that fails for good (an error
 * the submitter does not retry) must end the sending and reach the benchmark as a failure it can
 * clean up after, not as a rejection nobody handles.
 */
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { LoadSends } from './load-sends.js';

test('a create that fails stops the sending and fails the load, and nothing goes unhandled', async () => {
  // Node ends the process on an unhandled rejection: the benchmark would stop before its cleanup,
  // leaving the stack's processes, the fake LLM and the database behind.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const refusal = new Error('8 RESOURCE_EXHAUSTED: no retry delay');
  const sent: string[] = [];
  const sends = new LoadSends({
    p3: 100,
    floodSeconds: 0.5,
    p0PerSecond: 50,
    started: performance.now(),
    submit: async (key) => {
      sent.push(key);
      await sleep(5);
      if (key === 'p3-3') throw refusal;
      return `id-${key}`;
    },
    signal: new AbortController().signal,
  });
  try {
    // Past the ticks in which Node reports a rejection nobody handled, and past more waves.
    await sleep(150);
    assert.deepEqual(unhandled, []);
    assert.equal(sends.failure?.error, refusal, 'the failure is known while the load goes on');
    const sentAtFailure = sent.length;
    await sleep(100);
    assert.equal(sent.length, sentAtFailure, 'no more creates once one failed');
    await assert.rejects(sends.settled(), (error) => error === refusal);
  } finally {
    sends.stop();
    await sends.settled().catch(() => undefined);
    process.off('unhandledRejection', onUnhandled);
  }
});

test('without failures the flood is timed once every P3 create was accepted', async () => {
  const sends = new LoadSends({
    p3: 20,
    floodSeconds: 0.05,
    p0PerSecond: 100,
    started: performance.now(),
    submit: (key) => Promise.resolve(`id-${key}`),
    signal: new AbortController().signal,
  });
  while (sends.floodSeconds === undefined) await sleep(5);
  sends.stop();
  await sends.settled();
  assert.equal(sends.p3Keys.length, 20);
  assert.ok(sends.p0Keys.length >= 1);
  assert.equal(sends.failure, undefined);
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { retryWhileDatabaseDown } from './database-outage.js';

/** What the `postgres` client rejects with when nothing listens on the port. */
function refused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
}

describe('retryWhileDatabaseDown', () => {
  it('tries again while the database is unreachable, keeping the message alive', async () => {
    let attempts = 0;
    let keptAlive = 0;
    const result = await retryWhileDatabaseDown(
      () => {
        attempts += 1;
        return attempts < 4 ? Promise.reject(refused()) : Promise.resolve('done');
      },
      { keepAlive: () => (keptAlive += 1), stopping: () => false, firstPauseMs: 1, maxPauseMs: 4 },
    );
    assert.equal(result, 'done');
    assert.equal(attempts, 4);
    assert.equal(keptAlive, 3, 'the message is kept alive before every pause');
  });

  it('keeps the message alive while an attempt is on its way', async () => {
    // A write that takes longer than the ack wait (a lock wait, a connection that went silent):
    // JetStream redelivered the message meanwhile, and each redelivery found the step still
    // running under its dispatch and was handed back, spending a delivery of `max_deliver`.
    let keptAlive = 0;
    let answer: (value: string) => void = () => {};
    const pending = new Promise<string>((resolve) => {
      answer = resolve;
      // The old code never keeps it alive: answer anyway after a while, so the test fails, not hangs.
      setTimeout(() => resolve('late'), 2_000);
    });
    const result = await retryWhileDatabaseDown(() => pending, {
      keepAlive: () => {
        keptAlive += 1;
        if (keptAlive === 3) answer('done');
      },
      stopping: () => false,
      firstPauseMs: 1,
      maxPauseMs: 20,
    });
    assert.equal(result, 'done', 'the message was kept alive while the attempt was pending');
    const after = keptAlive;
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(keptAlive, after, 'no keep-alive once the attempt settled');
  });

  it('throws other errors at once', async () => {
    let attempts = 0;
    await assert.rejects(
      retryWhileDatabaseDown(
        () => {
          attempts += 1;
          return Promise.reject(new Error('null value in column "x"'));
        },
        { keepAlive: () => {}, stopping: () => false, firstPauseMs: 1 },
      ),
      /null value/,
    );
    assert.equal(attempts, 1);
  });

  it('gives up when the bound passes or the executor stops', async () => {
    let attempts = 0;
    await assert.rejects(
      retryWhileDatabaseDown(
        () => {
          attempts += 1;
          return Promise.reject(refused());
        },
        {
          keepAlive: () => {},
          stopping: () => false,
          maxWaitMs: 30,
          firstPauseMs: 5,
          maxPauseMs: 5,
        },
      ),
      /ECONNREFUSED/,
    );
    assert.ok(attempts >= 2 && attempts <= 8, `kept trying within the bound (${attempts})`);
    let stopping = false;
    await assert.rejects(
      retryWhileDatabaseDown(
        () => {
          stopping = true;
          return Promise.reject(refused());
        },
        { keepAlive: () => {}, stopping: () => stopping, firstPauseMs: 1 },
      ),
      /ECONNREFUSED/,
    );
  });
});

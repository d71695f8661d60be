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

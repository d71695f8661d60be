/**
 * The sample's writes against the real Postgres: the table is created on first use (also by
 * parallel writers), and a repeated write — a retried step — inserts nothing twice.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '@sluice/db/testing';
import { countTaskRows, samplesDatabaseUrl, writeDocumentRows } from './sample-store.js';

let database: TestDatabase;
const signal = AbortSignal.timeout(30_000);

before(async () => {
  database = await createTestDatabase();
  process.env.SLUICE_SAMPLES_DATABASE_URL = database.url;
});

after(async () => {
  delete process.env.SLUICE_SAMPLES_DATABASE_URL;
  await database.drop();
});

describe('sample store', () => {
  it('creates its table once under parallel first writers', async () => {
    const taskId = randomUUID();
    const results = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((document) =>
        writeDocumentRows(
          { taskId, document, name: `doc ${document}`, rows: [{ n: document }, { n: -document }] },
          signal,
        ),
      ),
    );
    assert.deepEqual(
      results,
      results.map(() => ({ inserted: 2, existing: 0 })),
    );
    const counts = await countTaskRows(taskId, signal);
    assert.deepEqual(
      [...counts.entries()].sort(),
      [0, 1, 2, 3, 4, 5].map((d) => [d, 2]),
    );
  });

  it('inserts nothing twice when a step repeats its write', async () => {
    const taskId = randomUUID();
    const rows = { taskId, document: 0, name: 'a.csv', rows: [{ a: '1' }, { a: '2' }, { a: '3' }] };
    assert.deepEqual(await writeDocumentRows(rows, signal), { inserted: 3, existing: 0 });
    assert.deepEqual(await writeDocumentRows(rows, signal), { inserted: 0, existing: 3 });
    assert.deepEqual([...(await countTaskRows(taskId, signal))], [[0, 3]]);
  });

  it('counts nothing for a task without rows', async () => {
    assert.equal((await countTaskRows(randomUUID(), signal)).size, 0);
  });

  it('needs a database URL', () => {
    assert.equal(samplesDatabaseUrl({ DATABASE_URL: 'postgres://x/y' }), 'postgres://x/y');
    assert.equal(
      samplesDatabaseUrl({
        DATABASE_URL: 'postgres://x/y',
        SLUICE_SAMPLES_DATABASE_URL: 'postgres://z/w',
      }),
      'postgres://z/w',
    );
    assert.throws(() => samplesDatabaseUrl({}), /SLUICE_SAMPLES_DATABASE_URL or DATABASE_URL/);
  });
});

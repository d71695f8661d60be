/**
 * The `postgres` driver as patched for Sluice (patches/postgres@3.4.9.patch): the behaviours the
 * patch fixes, checked against the real server so an upgrade that drops the patch is caught.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import postgres from 'postgres';
import { createTestDatabase, startTurnCounter, type TestDatabase } from './testing/index.js';

let database: TestDatabase;

before(async () => {
  database = await createTestDatabase();
});

after(async () => {
  await database.drop();
});

describe('transactions of the postgres driver (porsager/postgres#823)', () => {
  it('reserve their connection even when its pipeline is full', async () => {
    // With no room in the pipeline the driver skipped the BEGIN's reservation of its connection:
    // every transaction failed with UNSAFE_TRANSACTION. Under load a full pipeline or a socket
    // write meeting backpressure did the same to one transaction in many (CreateTask answered
    // INTERNAL). `max_pipeline: 0` makes every statement meet a full pipeline.
    // (`max_pipeline` is a runtime option the driver's types leave out.)
    const options = { max: 2, max_pipeline: 0, onnotice: () => {} } as postgres.Options<
      Record<string, never>
    >;
    const sql = postgres(database.url, options);
    try {
      const results = await Promise.all(
        [1, 2, 3, 4, 5, 6].map((n) =>
          sql.begin(async (tx) => {
            // Both statements in the one transaction: the same transaction id.
            const [first] = await tx<
              { id: string }[]
            >`select txid_current()::text as id, ${n}::int`;
            const [second] = await tx<{ id: string }[]>`select txid_current()::text as id`;
            return { n, same: first?.id === second?.id };
          }),
        ),
      );
      assert.deepEqual(
        results,
        [1, 2, 3, 4, 5, 6].map((n) => ({ n, same: true })),
      );
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

describe('transactions of the postgres driver (Sluice patch: pipelined BEGIN)', () => {
  it('send BEGIN with their first statements: a round trip fewer, still one transaction', async () => {
    const proxy = await startTurnCounter(database.url);
    const sql = postgres(proxy.url, { max: 1, onnotice: () => {} });
    try {
      await sql`create table pipelined (n int primary key)`; // connected, types fetched
      proxy.reset();
      const ids = await sql.begin(async (tx) => {
        const [first] = await tx<{ id: string }[]>`select txid_current()::text as id`;
        await tx`insert into pipelined values (1)`;
        const [second] = await tx<{ id: string }[]>`select txid_current()::text as id`;
        return [first?.id, second?.id];
      });
      // BEGIN with the first select, the insert, the second select, COMMIT: four turns (five
      // when BEGIN waits for its answer).
      assert.equal(proxy.turns(), 4);
      assert.equal(ids[0], ids[1], 'one transaction id');
      assert.ok(ids[0] !== undefined);

      // A failed transaction leaves nothing behind: its statements ran inside it.
      await assert.rejects(
        sql.begin(async (tx) => {
          await tx`insert into pipelined values (2)`;
          await tx`insert into pipelined values (1)`; // duplicate key
        }),
        (error: unknown) => (error as { code?: string }).code === '23505',
      );
      // BEGIN's options apply to the statements sent with it.
      await assert.rejects(
        sql.begin('read only', (tx) => tx`insert into pipelined values (3)`),
        (error: unknown) => (error as { code?: string }).code === '25006',
      );
      const rows = await sql<{ n: number }[]>`select n from pipelined order by n`;
      assert.deepEqual(
        rows.map((row) => row.n),
        [1],
      );
    } finally {
      await sql.end({ timeout: 5 });
      await proxy.close();
    }
  });
});

/**
 * KeptConnection against real Postgres: its transactions stay on one connection, go through while
 * the pool's other connections are busy, and survive the connection's loss.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { openDatabase, type DatabaseHandle } from './client.js';
import { KeptConnection } from './kept-connection.js';
import {
  createTestDatabase,
  waitForLockWaiter,
  withinSeconds,
  type TestDatabase,
} from './testing/index.js';

let database: TestDatabase;

before(async () => {
  database = await createTestDatabase();
  const setup = postgres(database.url, { max: 1, onnotice: () => {} });
  await setup`create table kept_marks (n int primary key)`;
  await setup.end({ timeout: 5 });
});

after(async () => {
  await database.drop();
});

/** The backend serving the transaction, and whether `n` could be marked in it. */
async function markOn(kept: KeptConnection, n: number): Promise<{ pid: number; marked: boolean }> {
  const [pid, insert] = await kept.transaction([
    sql`select pg_backend_pid() as pid`,
    sql`insert into kept_marks (n) values (${n})`,
  ]);
  assert.equal(pid?.status, 'fulfilled');
  return { pid: Number(pid.value[0]?.['pid']), marked: insert?.status === 'fulfilled' };
}

/** What each test gets: a pool of `max`, a kept connection of it, and a client apart from it. */
interface KeptSetup {
  readonly handle: DatabaseHandle;
  readonly kept: KeptConnection;
  readonly admin: postgres.Sql;
}

async function withKept(max: number, use: (setup: KeptSetup) => Promise<void>) {
  const handle = openDatabase(database.url, { max });
  const kept = new KeptConnection(handle.db);
  const admin = postgres(database.url, { max: 1, onnotice: () => {} });
  try {
    await use({ handle, kept, admin });
  } finally {
    await admin.end({ timeout: 5 });
    await kept.close();
    await handle.sql`delete from kept_marks`;
    await handle.close();
  }
}

describe('KeptConnection', () => {
  it('runs its transactions on one connection; a failed statement rolls back its own only', async () => {
    await withKept(3, async ({ handle, kept }) => {
      const first = await markOn(kept, 1);
      const again = await markOn(kept, 1); // the key is taken: this one rolls back
      const third = await markOn(kept, 2);
      assert.deepEqual(
        [first.marked, again.marked, third.marked],
        [true, false, true],
        'each transaction committed exactly when all its statements succeeded',
      );
      assert.equal(again.pid, first.pid);
      assert.equal(third.pid, first.pid);
      const rows = await handle.sql<{ n: number }[]>`select n from kept_marks order by n`;
      assert.deepEqual(
        rows.map((row) => row.n),
        [1, 2],
      );
    });
  });

  it('is not held up by the pool: its connection is idle while the others are blocked', async () => {
    await withKept(2, async ({ handle, kept, admin }) => {
      await markOn(kept, 10); // reserves one of the two connections
      await admin`select pg_advisory_lock(4242)`;
      // The pool's other connection waits for the lock, and the pool queues behind it.
      const blocked = handle.sql`select pg_advisory_lock(4242), pg_advisory_unlock(4242)`;
      const queued = handle.sql`select 1`;
      void blocked.catch(() => {});
      void queued.catch(() => {});
      await waitForLockWaiter(admin);
      const marked = await withinSeconds(5, markOn(kept, 11));
      assert.equal(marked === 'too late' ? marked : marked.marked, true);
      await admin`select pg_advisory_unlock(4242)`;
      await Promise.all([blocked, queued]);
    });
  });

  it('takes another connection after losing its own, and refuses work once closed', async () => {
    await withKept(2, async ({ handle, kept, admin }) => {
      const { pid } = await markOn(kept, 20);
      await admin`select pg_terminate_backend(${pid})`;
      // The transaction that meets the dead connection fails (or, had the close been seen
      // first, runs on a new one); the next runs on a connection of its own again.
      let next: { pid: number; marked: boolean } | undefined;
      for (let attempt = 0; attempt < 3 && next === undefined; attempt += 1) {
        next = await markOn(kept, 21).catch(() => undefined);
      }
      assert.ok(next?.marked);
      assert.notEqual(next.pid, pid);
      assert.equal((await markOn(kept, 22)).pid, next.pid);
      await kept.close();
      await assert.rejects(markOn(kept, 23), /closed/);
      // Released: the pool can reserve both its connections again.
      const both = await withinSeconds(
        5,
        Promise.all([handle.sql.reserve(), handle.sql.reserve()]),
      );
      assert.notEqual(both, 'too late');
      if (both !== 'too late') for (const reserved of both) reserved.release();
    });
  });

  it('sends a transaction again when a migration made one of its prepared statements stale', async () => {
    // A column added under a prepared `returning *` fails it once ("cached plan must not change
    // result type", 0A000) and with it the transaction, which wrote nothing. The driver prepares
    // it again only for a later statement: the transaction is sent again, once per stale statement.
    await withKept(2, async ({ kept, admin }) => {
      await admin`create table kept_stale (n int)`;
      try {
        const write = (n: number) =>
          kept.transaction([
            sql`insert into kept_stale (n) values (${n}) returning *`,
            sql`select * from kept_stale where n = ${n}`,
            sql`insert into kept_marks (n) values (${n})`,
          ]);
        const statuses = async (n: number) => (await write(n)).map((outcome) => outcome.status);
        assert.deepEqual(await statuses(1), ['fulfilled', 'fulfilled', 'fulfilled']);
        await admin`alter table kept_stale add column m int`;
        assert.deepEqual(await statuses(2), ['fulfilled', 'fulfilled', 'fulfilled']);
        const rows = await admin<{ n: number }[]>`select n from kept_stale order by n`;
        assert.deepEqual(
          rows.map((row) => row.n),
          [1, 2],
        );
      } finally {
        await admin`drop table kept_stale`;
      }
    });
  });
});

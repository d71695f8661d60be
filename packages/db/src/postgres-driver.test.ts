/**
 * The `postgres` driver as patched for Sluice (patches/postgres@3.4.9.patch): the behaviours the
 * patch fixes or changes, checked against the real server so an upgrade that drops the patch is
 * caught.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import postgres from 'postgres';
import {
  createTestDatabase,
  startPostgresServer,
  startTurnCounter,
  withinSeconds,
  type TestDatabase,
} from './testing/index.js';

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

describe('the pool of the postgres driver (Sluice patch: last in, first out)', () => {
  it('hands out the connection that became idle last, to statements and to reservations', async () => {
    const sql = postgres(database.url, { max: 3, onnotice: () => {} });
    try {
      // Three connections open at once, each holding its statement a moment so none is reused.
      const opened = await Promise.all(
        [1, 2, 3].map(() => sql<{ pid: number }[]>`select pg_backend_pid() as pid, pg_sleep(0.05)`),
      );
      assert.equal(new Set(opened.map(([row]) => row?.pid)).size, 3, 'three backends');
      const [last] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      const pids: (number | undefined)[] = [];
      for (let i = 0; i < 6; i++) {
        const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
        pids.push(row?.pid);
        const reserved = await sql.reserve();
        try {
          const [held] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
          pids.push(held?.pid);
        } finally {
          reserved.release();
        }
      }
      // Taking the longest idle one instead, they went round all three.
      assert.deepEqual(pids, Array<number | undefined>(12).fill(last?.pid));
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

describe('the array types of the postgres driver (Sluice patch: fetched once per pool)', () => {
  it('are fetched by the first connection only, and parse arrays on every connection', async () => {
    const typeQueries: number[] = []; // the connection of each type query
    const sql = postgres(database.url, {
      max: 2,
      onnotice: () => {},
      debug: (connection, query) => {
        if (query.includes('typarray')) typeQueries.push(connection);
      },
    });
    try {
      const [first] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      assert.equal(typeQueries.length, 1, 'the first connection fetched the types');
      // The first connection busy, the next statement opens the second one.
      const reserved = await sql.reserve();
      try {
        const [second] = await sql<{ pid: number; ints: number[]; ids: string[] }[]>`
          select pg_backend_pid() as pid, array[1, 2]::int4[] as ints,
                 ${['7f9f2b0e-4a49-4f3e-9c61-3f3c4e2f1a10']}::uuid[] as ids`;
        assert.notEqual(second?.pid, first?.pid, 'a second backend');
        // An array parsed on the connection that fetched nothing, and one sent from it.
        assert.deepEqual(second?.ints, [1, 2]);
        assert.deepEqual(second?.ids, ['7f9f2b0e-4a49-4f3e-9c61-3f3c4e2f1a10']);
      } finally {
        reserved.release();
      }
      assert.equal(typeQueries.length, 1, 'the second connection did not fetch them again');
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it('hand a reservation the connection it opened, also when that connection fetched nothing', async () => {
    // The driver served a reservation that opened a connection only once that connection's type
    // fetch had answered (porsager/postgres#751): a connection that fetches none left it waiting
    // for good (the suite's pressure-signals test hung so, three reservations opening two).
    const sql = postgres(database.url, { max: 2, onnotice: () => {} });
    const cold = postgres(database.url, { max: 1, fetch_types: false, onnotice: () => {} });
    try {
      await sql`select 1`; // the pool's first connection, which fetched the types
      const both = await withinSeconds(5, Promise.all([sql.reserve(), sql.reserve()]));
      assert.notEqual(both, 'too late', 'the reservation that opened a connection was answered');
      if (both !== 'too late') for (const reserved of both) reserved.release();
      const alone = await withinSeconds(5, cold.reserve());
      assert.notEqual(alone, 'too late', 'a reservation on a cold pool that fetches no types');
      if (alone !== 'too late') alone.release();
    } finally {
      await sql.end({ timeout: 5 });
      await cold.end({ timeout: 5 });
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

describe('a stale prepared statement in a pipelined transaction (Sluice patch)', () => {
  it('fails inside the transaction instead of running again after its COMMIT', async () => {
    // A migration that adds a column makes a prepared `returning *` fail with "cached plan must
    // not change result type". The driver ran such a statement again, behind the statements
    // pipelined after it: in a one-write transaction (one-write.ts) after its COMMIT, which the
    // error had made a rollback, so the statement ran and committed on its own while the caller
    // saw a statement after it fail (rolled back). Two connections: one reserved, one to alter.
    const sql = postgres(database.url, { max: 2, onnotice: () => {} });
    try {
      await sql`create table stale_plan (n int)`;
      await sql`create table stale_plan_beside (n int)`;
      const reserved = await sql.reserve();
      const options = { prepare: true };
      const oneWrite = async (n: number) => {
        const queries = [
          reserved`begin`,
          reserved.unsafe('insert into stale_plan values ($1) returning *', [n], options),
          reserved.unsafe('insert into stale_plan_beside values ($1)', [n], options),
          reserved`commit`,
        ];
        for (const query of queries) void query.execute();
        const outcomes = await Promise.allSettled(queries);
        return outcomes.map((outcome) =>
          outcome.status === 'fulfilled' ? 'ok' : (outcome.reason as { code?: string }).code,
        );
      };
      try {
        assert.deepEqual(await oneWrite(1), ['ok', 'ok', 'ok', 'ok']);
        await sql`alter table stale_plan add column m int`;
        const [, insert, beside] = await oneWrite(2);
        assert.equal(beside, '25P02', 'the transaction was aborted');
        assert.equal(insert, '0A000', 'the stale statement failed in it');
        // The next try prepares the statement again and commits.
        assert.deepEqual(await oneWrite(3), ['ok', 'ok', 'ok', 'ok']);
      } finally {
        reserved.release();
      }
      const rows = await sql<{ n: number }[]>`select n from stale_plan order by n`;
      assert.deepEqual(
        rows.map((row) => row.n),
        [1, 3],
        'nothing of the failed transaction committed',
      );
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

describe('the postgres driver after a connection dies (Sluice patch: porsager/postgres#1130)', () => {
  /** The answer of `query`, or its error code, or "hung" when it settled in neither within 10 s. */
  async function settled(query: Promise<unknown>): Promise<string> {
    const answer = await withinSeconds(
      10,
      query.then(
        () => 'ok',
        (error: unknown) => String((error as { code?: unknown }).code ?? error),
      ),
    );
    return answer === 'too late' ? 'hung' : answer;
  }

  /**
   * Runs `scenario` with a pool of one connection and a way to end that connection's backend (as a
   * restart or failover would), until the scenario reports that its query met the dead socket (it
   * may see the close first and reconnect instead); then checks the pool answers again.
   */
  async function withDyingConnection(
    scenario: (sql: postgres.Sql, kill: (pid: number) => Promise<void>) => Promise<boolean>,
  ): Promise<void> {
    const sql = postgres(database.url, { max: 1, onnotice: () => {}, backoff: () => 0.05 });
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    const kill = async (pid: number) => {
      await admin`select pg_terminate_backend(${pid})`;
    };
    try {
      let met = false;
      for (let attempt = 0; attempt < 10 && !met; attempt += 1) met = await scenario(sql, kill);
      assert.ok(met, 'no query met the dead connection in 10 attempts');
      let answered = false;
      for (let attempt = 0; attempt < 5 && !answered; attempt += 1) {
        answered = (await settled(sql`select 1`)) === 'ok';
      }
      assert.ok(answered, 'the pool did not answer again');
    } finally {
      await sql.end({ timeout: 5 });
      await admin.end({ timeout: 5 });
    }
  }

  it('fails a query given to the connection between its socket error and its close', async () => {
    await withDyingConnection(async (sql, kill) => {
      const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      await kill(row!.pid);
      // When the first query meets the reset, the next is given to the same connection before its
      // close is seen. Unpatched, it waited forever (and every later query of the pool with it).
      if ((await settled(sql`select 1`)) === 'ok') return false;
      assert.notEqual(await settled(sql`select 1`), 'hung');
      return true;
    });
  });

  it('keeps the pool working when a reserved connection died before it was released', async () => {
    await withDyingConnection(async (sql, kill) => {
      const reserved = await sql.reserve();
      try {
        const [row] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
        await kill(row!.pid);
        if ((await settled(reserved`select 1`)) === 'ok') return false;
      } finally {
        reserved.release();
      }
      // Unpatched, the released dead connection sat among the open ones and this query hung.
      assert.notEqual(await settled(sql`select 1`), 'hung');
      return true;
    });
  });

  it('fails the statements waiting in a reservation of a full connection when it dies', async () => {
    // One statement in flight fills the pipeline (`max_pipeline: 1`, a runtime option the driver's
    // types leave out), so the reservation's next statements wait in its own queue. Unpatched,
    // they were never settled when the connection died: a one-write transaction hung forever.
    const options = {
      max: 1,
      max_pipeline: 1,
      onnotice: () => {},
      backoff: () => 0.05,
    } as postgres.Options<Record<string, never>>;
    const sql = postgres(database.url, options);
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await admin`select pg_advisory_lock(4343)`;
      const reserved = await sql.reserve();
      const [row] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
      const statements = [
        reserved`select pg_advisory_lock(4343)`,
        reserved`select 1`,
        reserved`select 2`,
      ];
      const outcomes = statements.map((statement) => settled(statement));
      await admin`select pg_terminate_backend(${row!.pid})`;
      for (const outcome of await Promise.all(outcomes)) assert.notEqual(outcome, 'hung');
      reserved.release();
      await admin`select pg_advisory_unlock(4343)`;
      assert.equal(await settled(sql`select 1`), 'ok');
    } finally {
      await sql.end({ timeout: 5 });
      await admin.end({ timeout: 5 });
    }
  });

  it('does not let a reservation whose connection closed reach the pool that took it back', async () => {
    await withDyingConnection(async (sql, kill) => {
      const stale = await sql.reserve();
      const [row] = await stale<{ pid: number }[]>`select pg_backend_pid() as pid`;
      await kill(row!.pid);
      if ((await settled(stale`select 1`)) === 'ok') {
        stale.release();
        return false;
      }
      // The pool connects the connection again for its own queries, then for a new reservation.
      let answered = false;
      for (let attempt = 0; attempt < 5 && !answered; attempt += 1) {
        answered = (await settled(sql`select 1`)) === 'ok';
      }
      assert.ok(answered);
      const current = await sql.reserve();
      try {
        // The stale reservation's statements fail rather than run on the connection it lost, and
        // its release leaves the new reservation in place.
        assert.equal(await settled(stale`select 1`), 'CONNECTION_CLOSED');
        stale.release();
        assert.equal(await settled(current`select 1`), 'ok');
      } finally {
        current.release();
      }
      return true;
    });
  });

  it('fails the later statements of a transaction whose connection died', async () => {
    // The callback of sql.begin goes on after its connection died (it awaited something else), and
    // meanwhile the pool connected that connection again for another query. Unpatched, the
    // callback's next statement went to the new session and ran there outside any transaction:
    // committed, while sql.begin had failed (and the earlier statements had rolled back).
    const sql = postgres(database.url, { max: 1, onnotice: () => {}, backoff: () => 0.05 });
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    const table = `stray_${process.pid}`;
    try {
      await admin.unsafe(`create table ${table} (n int)`);
      let backendIs!: (pid: number) => void;
      const backend = new Promise<number>((resolve) => (backendIs = resolve));
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      let strayIs!: (outcome: string) => void;
      const stray = new Promise<string>((resolve) => (strayIs = resolve));
      const transaction = settled(
        sql.begin(async (tx) => {
          const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
          backendIs(row!.pid);
          await resumed;
          strayIs(await settled(tx.unsafe(`insert into ${table} values (1)`)));
        }),
      );
      await admin`select pg_terminate_backend(${await backend})`;
      assert.equal(await transaction, 'CONNECTION_CLOSED');
      assert.equal(await settled(sql`select 1`), 'ok', 'the pool connected again');
      resume();
      assert.equal(await withinSeconds(10, stray), 'CONNECTION_CLOSED');
      const [written] = await admin.unsafe<{ n: number }[]>(
        `select count(*)::int as n from ${table}`,
      );
      assert.equal(written?.n, 0, 'nothing of the failed transaction was written');
    } finally {
      await admin.unsafe(`drop table if exists ${table}`);
      await sql.end({ timeout: 5 });
      await admin.end({ timeout: 5 });
    }
  });

  it('settles every statement of a transaction whose connection died, and leaves the pool be', async () => {
    // One statement in flight fills the pipeline (`max_pipeline: 1`), so the transaction's next
    // statements wait in its own queue; a query of the pool waits for the reserved connection.
    // Unpatched, the queued statements were never settled when the connection died, and the
    // transaction's ROLLBACK went to the connection that the pool was connecting again for its
    // waiting query, which failed it with CONNECTION_CLOSED although nothing had happened to it.
    const options = {
      max: 1,
      max_pipeline: 1,
      onnotice: () => {},
      backoff: () => 0.05,
    } as postgres.Options<Record<string, never>>;
    const sql = postgres(database.url, options);
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await admin`select pg_advisory_lock(4344)`;
      let outcomesAre!: (outcomes: Promise<string>[]) => void;
      const outcomes = new Promise<Promise<string>[]>((resolve) => (outcomesAre = resolve));
      let backend = 0;
      const transaction = settled(
        sql.begin(async (tx) => {
          const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
          backend = row!.pid;
          const statements = [tx`select pg_advisory_lock(4344)`, tx`select 1`, tx`select 2`];
          outcomesAre(statements.map((statement) => settled(statement)));
          return Promise.all(statements);
        }),
      );
      const waiting = await outcomes;
      const queued = settled(sql`select 1`);
      await admin`select pg_terminate_backend(${backend})`;
      for (const outcome of await Promise.all(waiting)) assert.notEqual(outcome, 'hung');
      assert.equal(await transaction, 'CONNECTION_CLOSED');
      assert.equal(await queued, 'ok', 'the query waiting for the connection was answered');
    } finally {
      await admin`select pg_advisory_unlock(4344)`;
      await sql.end({ timeout: 5 });
      await admin.end({ timeout: 5 });
    }
  });
});

describe('reservations waiting for a connection (Sluice patch)', () => {
  /** Waits until the backend `pid` runs a statement that starts with `start`. */
  async function waitUntilRunning(admin: postgres.Sql, pid: number, start: string): Promise<void> {
    for (;;) {
      const [row] = await admin<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where pid = ${pid} and state = 'active' and query like ${`${start}%`}`;
      if (row?.n === 1) return;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  it('is handed the connection that closed and reconnected for it', async () => {
    // The only connection is busy, so the reservation waits in the pool's queue. When that
    // connection closes (a restart, a failover), the pool connects it again for the first query
    // waiting. Unpatched, a reservation taken off the queue so was dropped once the connection
    // was open: its reserve() never settled (an executor's outcome writes hung after an outage).
    const sql = postgres(database.url, { max: 1, onnotice: () => {}, backoff: () => 0.05 });
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      const sleeping = sql`select pg_sleep(30)`.then(
        () => 'ok',
        (error: unknown) => String((error as { code?: unknown }).code),
      );
      await waitUntilRunning(admin, row!.pid, 'select pg_sleep');
      const reserving = sql.reserve();
      await admin`select pg_terminate_backend(${row!.pid})`;
      assert.notEqual(await sleeping, 'ok', 'the statement of the ended backend failed');
      const reserved = await withinSeconds(10, reserving);
      assert.notEqual(reserved, 'too late', 'the waiting reservation was answered');
      if (reserved !== 'too late') {
        const [again] = await reserved<{ n: number }[]>`select 1 as n`;
        assert.equal(again?.n, 1);
        reserved.release();
      }
      assert.notEqual(await withinSeconds(10, sql`select 1`), 'too late');
    } finally {
      await sql.end({ timeout: 5 });
      await admin.end({ timeout: 5 });
    }
  });

  it('are each answered across a restart, and the pool keeps every connection', async () => {
    // Reservations that wait while Postgres is down are refused one per failed connection attempt
    // and asked again, as an executor's outcome writer does. Unpatched, a refused reservation could
    // stay in the pool's queue: served later, it swallowed an open connection (lost to the pool
    // for good) or, first in the queue, held back the reservations behind it.
    await using server = await startPostgresServer();
    const sql = postgres(server.url, { max: 2, onnotice: () => {}, backoff: () => 0.05 });
    try {
      await sql`select 1`;
      await server.stop();
      let down = true;
      const reserveUntilAnswered = async (): Promise<number> => {
        for (let tries = 1; ; tries++) {
          try {
            const reserved = await sql.reserve();
            await reserved`select 1`;
            reserved.release();
            if (!down) return tries;
          } catch {
            // Refused while Postgres is down (or starting up): ask again.
          }
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      // More reservations than connections, so some wait in the queue while others connect.
      const reservers = Array.from({ length: 5 }, () => reserveUntilAnswered());
      await server.restart();
      down = false;
      const answered = await withinSeconds(15, Promise.all(reservers));
      assert.notEqual(answered, 'too late', 'every reservation was answered after the restart');
      // Both connections back in the pool: two reservations at once.
      const both = await withinSeconds(10, Promise.all([sql.reserve(), sql.reserve()]));
      assert.notEqual(both, 'too late', 'the pool kept both its connections');
      if (both !== 'too late') for (const reserved of both) reserved.release();
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

describe('queries waiting for a connection while Postgres is down (Sluice patch)', () => {
  it('fail with a refused connection attempt, not each at an attempt of its own', async () => {
    // While Postgres is down every connection of the pool is connecting or waiting to, and a query
    // waits in the pool's queue. Unpatched, a refused attempt failed only the query it was made
    // for, and the next waited for the next attempt, after the pool's pause: with two connections
    // and a pause of a second the twentieth query was answered after ten, though Postgres was as
    // down for it as for the first (a busy gateway answered its requests ever later, and ran those
    // still waiting once Postgres was back, long after their callers had given up).
    await using server = await startPostgresServer();
    const sql = postgres(server.url, { max: 2, onnotice: () => {}, backoff: () => 1 });
    try {
      await sql`select 1`;
      await server.stop();
      const queries = Array.from({ length: 20 }, () =>
        sql`select 1`.then(
          () => 'ok',
          (error: unknown) => String((error as { code?: unknown }).code),
        ),
      );
      const answers = await withinSeconds(5, Promise.all(queries));
      assert.notEqual(answers, 'too late', 'every query was answered within 5 s');
      if (answers !== 'too late') assert.ok(!answers.includes('ok'), answers.join());
      await server.restart();
      let answered = false;
      for (let attempt = 0; attempt < 20 && !answered; attempt += 1) {
        answered = await sql`select 1`.then(
          () => true,
          () => false,
        );
      }
      assert.ok(answered, 'the pool answered again once Postgres was back');
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

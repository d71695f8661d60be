import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import postgres from 'postgres';
import { adminDatabaseUrl } from '@sluice/db/testing';
import {
  POSTGRES_WORK_QUERY,
  PostgresWorkWindow,
  postgresWorkOf,
  postgresWorkPerJob,
  type PostgresWorkMark,
  type PostgresWorkRow,
} from './postgres-work.js';

describe('the server work per job', () => {
  it('reads the counters as numbers and refuses anything else', () => {
    assert.deepEqual(postgresWorkOf({ next_xid: '7412', wal_bytes: '368570832' }), {
      nextTransactionId: 7412,
      walBytes: 368570832,
    });
    assert.throws(() => postgresWorkOf(undefined), /not a Postgres work reading/);
    assert.throws(() => postgresWorkOf({ next_xid: 'x', wal_bytes: '1' }), /not a Postgres/);
    assert.throws(() => postgresWorkOf({ next_xid: '1', wal_bytes: '1.5' }), /not a Postgres/);
  });

  it('counts each transaction that writes, and none that only reads', async () => {
    const sql = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
    // A logged table: a temporary one writes no WAL.
    const table = sql(`postgres_work_probe_${randomBytes(4).toString('hex')}`);
    try {
      await sql`create table ${table} (n int)`;
      const read = async () =>
        postgresWorkOf((await sql.unsafe<PostgresWorkRow[]>(POSTGRES_WORK_QUERY))[0]);
      const before = await read();
      for (let n = 0; n < 5; n++) await sql`insert into ${table} values (${n})`;
      const written = await read();
      // Other tests may write to the server meanwhile: at least ours, and WAL for them.
      const writes = postgresWorkPerJob(before, written, 5);
      assert.ok(writes.transactions >= 1, `${writes.transactions} write transactions per insert`);
      assert.ok(writes.walBytes > 0, 'the inserts wrote WAL');
      // What the count rests on, asked of the transactions themselves (other tests' writes would
      // blur a count across the server): one that only reads takes no id, one that writes does.
      const idTaken = (statement: (tx: postgres.TransactionSql) => Promise<unknown>) =>
        sql.begin(async (tx) => {
          await statement(tx);
          const [row] = await tx<{ id: string | null }[]>`
            select pg_current_xact_id_if_assigned()::text as id`;
          return row?.id ?? null;
        });
      assert.equal(await idTaken((tx) => tx`select count(*) from ${table}`), null, 'a read');
      assert.notEqual(await idTaken((tx) => tx`insert into ${table} values (0)`), null, 'a write');
    } finally {
      await sql`drop table if exists ${table}`;
      await sql.end({ timeout: 5 });
    }
  });

  describe('over a window of starts', () => {
    /** A reader answering the given marks in turn. */
    const reader = (...marks: PostgresWorkMark[]) => {
      let next = 0;
      return () => {
        const mark = marks[next++];
        return mark === undefined
          ? Promise.reject(new Error('read once too often'))
          : Promise.resolve(mark);
      };
    };

    it('divides the difference by the starts in between', async () => {
      const window = new PostgresWorkWindow(
        reader(
          { nextTransactionId: 100, walBytes: 10_000 },
          { nextTransactionId: 180, walBytes: 91_920 },
        ),
      );
      window.opened(25);
      window.opened(30); // ignored: the window opened at 25
      window.closed(45);
      window.closed(50); // ignored: the window closed at 45
      const { figures, note } = await window.result();
      assert.deepEqual(
        figures.map((f) => [f.key, f.value]),
        [
          ['pg_transactions_per_job', 4],
          ['pg_wal_kb_per_job', 4],
        ],
      );
      assert.match(note ?? '', /4\.00 write transactions and 4\.0 KB of WAL/);
    });

    it('reports nothing until it closes, and a failed reading as a note', async () => {
      const open = new PostgresWorkWindow(reader({ nextTransactionId: 1, walBytes: 1 }));
      open.opened(10);
      assert.deepEqual(await open.result(), { figures: [] });
      const unread = new PostgresWorkWindow(() => Promise.reject(new Error('connection refused')));
      unread.closed(5); // before opening: nothing
      unread.opened(10);
      unread.closed(20);
      const { figures, note } = await unread.result();
      assert.deepEqual(figures, []);
      assert.match(note ?? '', /not read \(connection refused\)/);
    });
  });
});

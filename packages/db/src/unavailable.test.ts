import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openDatabase } from './client.js';
import { startPostgresServer } from './testing/index.js';
import { isDatabaseUnavailable } from './unavailable.js';

describe('a pool across a Postgres outage', () => {
  it('fails queries as unavailable while Postgres is down, then every connection works again', async () => {
    await using server = await startPostgresServer();
    const pool = 4;
    const handle = openDatabase(server.url, { max: pool, connectTimeoutMs: 2_000 });
    try {
      // Busy connections when the server goes away: queries in flight and queued.
      const busy = Array.from({ length: pool * 3 }, () =>
        handle.sql`select pg_sleep(0.2)`.then(
          () => 'ok' as const,
          (error: unknown) => error,
        ),
      );
      await server.stop();
      const outcomes = await Promise.all(busy);
      for (const outcome of outcomes) {
        if (outcome === 'ok') continue;
        assert.ok(isDatabaseUnavailable(outcome), `unavailable, not: ${String(outcome)}`);
      }
      const whileDown = await handle.sql`select 1`.catch((error: unknown) => error);
      assert.ok(isDatabaseUnavailable(whileDown), `refused while down: ${String(whileDown)}`);

      await server.restart();
      // Every connection of the pool at once (each holds its query), none left broken.
      const pids = await Promise.all(
        Array.from(
          { length: pool },
          async () =>
            (await handle.sql<{ pid: number }[]>`select pg_backend_pid() as pid, pg_sleep(0.3)`)[0]
              ?.pid,
        ),
      );
      assert.equal(new Set(pids).size, pool, 'all connections of the pool answer again');
    } finally {
      await handle.close();
    }
  });

  it('tells connection trouble from other database errors', async () => {
    await using server = await startPostgresServer();
    const handle = openDatabase(server.url, { max: 1 });
    try {
      const syntax = await handle.sql`select from nowhere_at_all`.catch((error: unknown) => error);
      assert.ok(syntax instanceof Error);
      assert.equal(isDatabaseUnavailable(syntax), false, 'a missing table is not an outage');
      const wrapped = new Error('Failed query', {
        cause: Object.assign(new Error('terminating connection'), { code: '57P01' }),
      });
      assert.equal(isDatabaseUnavailable(wrapped), true, 'admin shutdown, through a wrapper');
      assert.equal(isDatabaseUnavailable('ECONNREFUSED'), false, 'only errors count');
    } finally {
      await handle.close();
    }
  });
});

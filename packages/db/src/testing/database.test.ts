import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { afterEach, describe, it } from 'node:test';
import postgres from 'postgres';
import {
  adminDatabaseUrl,
  createTestDatabase,
  migratedTemplate,
  startPostgresServer,
} from './index.js';

/** Runs `work` with a one-connection client for `url`, closed afterwards. */
async function withSql<T>(url: string, work: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await work(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function databaseExists(name: string, adminUrl = adminDatabaseUrl()): Promise<boolean> {
  return withSql(adminUrl, async (sql) => {
    const rows = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
    return rows.length === 1;
  });
}

describe('adminDatabaseUrl', () => {
  const saved = process.env.DATABASE_URL;
  afterEach(() => {
    if (saved === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = saved;
  });

  it('points DATABASE_URL at the postgres database, keeping everything else', () => {
    process.env.DATABASE_URL = 'postgres://app:s3cret@db.example:6543/sluice?sslmode=require';
    assert.equal(
      adminDatabaseUrl(),
      'postgres://app:s3cret@db.example:6543/postgres?sslmode=require',
    );
  });

  it('falls back to the local default server', () => {
    delete process.env.DATABASE_URL;
    assert.equal(adminDatabaseUrl(), 'postgres://postgres@127.0.0.1:5432/postgres');
  });
});

describe('createTestDatabase', () => {
  it('creates a fresh, uniquely named database and drops it on dispose', async () => {
    let name: string;
    let lingering: postgres.Sql | undefined;
    {
      await using first = await createTestDatabase();
      await using second = await createTestDatabase();
      ({ name } = first);
      assert.match(first.name, /^sluice_t_[a-z0-9]+$/);
      assert.notEqual(first.name, second.name);
      await withSql(first.url, async (sql) => {
        const [row] = await sql<{ db: string }[]>`SELECT current_database() AS db`;
        assert.equal(row?.db, first.name);
        await sql`CREATE TABLE only_here (id int)`;
      });
      await withSql(second.url, async (sql) => {
        const rows = await sql`SELECT 1 FROM pg_tables WHERE tablename = 'only_here'`;
        assert.equal(rows.length, 0, 'databases are independent');
      });
      // Left open on purpose: dropping must not wait for clients to go away.
      lingering = postgres(first.url, { max: 1, onnotice: () => {} });
      await lingering`SELECT 1`;
    }
    assert.equal(await databaseExists(name), false);
    await lingering.end({ timeout: 1 });
  });
});

describe('migratedTemplate', () => {
  it('migrates once, and every clone starts with the migrated schema', async () => {
    let migrations = 0;
    const migrate = async (url: string) => {
      migrations++;
      await withSql(url, async (sql) => {
        await sql`CREATE TABLE widgets (id int PRIMARY KEY, name text NOT NULL)`;
        await sql`INSERT INTO widgets VALUES (1, 'seed')`;
      });
    };
    const options = { label: 'selftest' };
    const [template, again] = await Promise.all([
      migratedTemplate(migrate, options),
      migratedTemplate(migrate, options),
    ]);
    assert.equal(template, again);
    assert.equal(migrations, 1);
    assert.match(template, /^sluice_tpl_[a-z0-9]+_selftest$/);

    await using a = await createTestDatabase({ template });
    await using b = await createTestDatabase({ template });
    await withSql(a.url, (sql) => sql`INSERT INTO widgets VALUES (2, 'only in a')`);
    const names = (url: string) =>
      withSql(url, async (sql) =>
        (await sql<{ name: string }[]>`SELECT name FROM widgets ORDER BY id`).map((r) => r.name),
      );
    assert.deepEqual(await names(a.url), ['seed', 'only in a']);
    assert.deepEqual(await names(b.url), ['seed']);
  });
});

describe('startPostgresServer', () => {
  it('runs a private cluster that keeps committed data across a crash and a restart', async () => {
    let dataDir: string;
    let url: string;
    {
      await using server = await startPostgresServer();
      ({ dataDir, url } = server);
      assert.notEqual(server.port, 5432, 'never the shared server');
      await withSql(server.url, async (sql) => {
        await sql`CREATE TABLE notes (body text)`;
        await sql`INSERT INTO notes VALUES ('committed before the crash')`;
      });

      await server.kill();
      assert.equal(server.running, false);
      await assert.rejects(withSql(server.url, (sql) => sql`SELECT 1`));

      await server.restart();
      await withSql(server.url, async (sql) => {
        const rows = await sql<{ body: string }[]>`SELECT body FROM notes`;
        assert.deepEqual(
          rows.map((r) => r.body),
          ['committed before the crash'],
        );
      });

      await server.stop();
      assert.equal(server.running, false);
      await server.restart();
      assert.equal(server.running, true);

      // Test databases can live on the private cluster too.
      await using db = await createTestDatabase({ adminUrl: server.url });
      await withSql(db.url, (sql) => sql`SELECT 1`);
    }
    assert.equal(existsSync(dataDir), false);
    await assert.rejects(withSql(url, (sql) => sql`SELECT 1`));
  });
});

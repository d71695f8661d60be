import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import postgres from 'postgres';
import { adminDatabaseUrl, databaseUrlFor } from './admin-url.js';

/** Options of {@link createTestDatabase}. */
export interface CreateTestDatabaseOptions {
  /** A database to clone (`CREATE DATABASE … TEMPLATE`), e.g. from {@link migratedTemplate}. */
  template?: string;
  /** The server's maintenance database; {@link adminDatabaseUrl} by default. */
  adminUrl?: string;
}

/** A database owned by one test. */
export interface TestDatabase extends AsyncDisposable {
  /** Connection URL of the database. */
  readonly url: string;
  readonly name: string;
  /** Drops the database, closing any connections still open to it. Safe to call twice. */
  drop(): Promise<void>;
}

/** Options of {@link migratedTemplate}. */
export interface MigratedTemplateOptions {
  /**
   * Distinguishes templates built by different migrate functions within one run (the default
   * `schema` is meant for the real migrations).
   */
  label?: string;
  /** The server's maintenance database; {@link adminDatabaseUrl} by default. */
  adminUrl?: string;
}

/** Leftover test databases older than this are dropped when a template is built. */
const STALE_AFTER_MS = 3 * 60 * 60 * 1000;
const TEST_DATABASE_PREFIX = 'sluice_t_';
const TEMPLATE_PREFIX = 'sluice_tpl_';
/** How long to wait for another test process that is building the same template. */
const TEMPLATE_LOCK_TIMEOUT = '3min';
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Creates a fresh database with a unique name (`sluice_t_<random>`), empty or cloned from
 * `template`. Dispose it (`await using`) to drop it.
 */
export async function createTestDatabase(
  options: CreateTestDatabaseOptions = {},
): Promise<TestDatabase> {
  const adminUrl = options.adminUrl ?? adminDatabaseUrl();
  const name = `${TEST_DATABASE_PREFIX}${randomId(10)}`;
  await withAdmin(adminUrl, async (sql) => {
    const template = options.template === undefined ? '' : ` TEMPLATE ${quote(options.template)}`;
    await sql.unsafe(`CREATE DATABASE ${quote(name)}${template}`);
    await markCreated(sql, name, { ownedByThisProcess: true });
  });
  let dropped: Promise<void> | undefined;
  const drop = () =>
    (dropped ??= withAdmin(adminUrl, async (sql) => {
      await sql.unsafe(`DROP DATABASE IF EXISTS ${quote(name)} WITH (FORCE)`);
    }));
  return { url: databaseUrlFor(adminUrl, name), name, drop, [Symbol.asyncDispose]: drop };
}

const templates = new Map<string, Promise<string>>();

/**
 * The name of a template database migrated by `migrate`, built once per run and label: the first
 * test process to ask builds `sluice_tpl_<run id>_<label>` (SLUICE_TEST_RUN_ID, which `npm test`
 * sets; a random id per process otherwise) while the others wait on an advisory lock, then all
 * clone it with {@link createTestDatabase}. `npm test` drops the run's templates at the end. Building
 * a template also drops what earlier processes left behind: databases of test processes on this
 * host that have exited (a per-process template, a crashed test's database), and any test database
 * older than a few hours.
 *
 * `migrate` must close its connections before it resolves: a database with open connections can
 * be neither renamed into place nor cloned.
 */
export function migratedTemplate(
  migrate: (url: string) => Promise<void>,
  options: MigratedTemplateOptions = {},
): Promise<string> {
  const label = options.label ?? 'schema';
  let template = templates.get(label);
  if (template === undefined) {
    template = buildTemplate(migrate, label, options.adminUrl ?? adminDatabaseUrl());
    templates.set(label, template);
  }
  return template;
}

/** Shared by every test process of one `npm test` run; without it each process has its own. */
const runIdFromEnv = process.env.SLUICE_TEST_RUN_ID;
const runId = runIdFromEnv ?? randomId(8);

async function buildTemplate(
  migrate: (url: string) => Promise<void>,
  label: string,
  adminUrl: string,
): Promise<string> {
  const name = `${TEMPLATE_PREFIX}${runId}_${label}`;
  // Built under another name and renamed when complete, so its existence means "ready".
  const building = `${name}_building`;
  quote(building); // Fails early on a run id or label that does not make a plain identifier.
  return withAdmin(adminUrl, async (sql) => {
    await sql.unsafe(`SET lock_timeout = '${TEMPLATE_LOCK_TIMEOUT}'`);
    await sql`SELECT pg_advisory_lock(hashtext(${name}))`;
    try {
      const [existing] = await sql`SELECT 1 FROM pg_database WHERE datname = ${name}`;
      if (existing) return name;
      await dropStaleDatabases(sql);
      // A process that died while building left this behind; its lock died with it.
      await sql.unsafe(`DROP DATABASE IF EXISTS ${quote(building)} WITH (FORCE)`);
      await sql.unsafe(`CREATE DATABASE ${quote(building)}`);
      // A per-process template is this process's to clean up; a run's template is the run's.
      await markCreated(sql, building, { ownedByThisProcess: runIdFromEnv === undefined });
      try {
        await migrate(databaseUrlFor(adminUrl, building));
        // A pool the migrate function forgot to close would block the rename, and every clone.
        await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${building}`;
        await sql.unsafe(`ALTER DATABASE ${quote(building)} RENAME TO ${quote(name)}`);
      } catch (error) {
        await sql.unsafe(`DROP DATABASE IF EXISTS ${quote(building)} WITH (FORCE)`);
        throw error;
      }
      return name;
    } finally {
      await sql`SELECT pg_advisory_unlock(hashtext(${name}))`;
    }
  });
}

/** What {@link markCreated} records in a database's comment. */
interface CreationNote {
  createdAt: string;
  /** The process that owns the database, when it is not shared by a whole run. */
  host?: string;
  pid?: number;
}

/** Records when and by whom a database was created, so leftovers can be recognised later. */
async function markCreated(
  sql: postgres.Sql,
  name: string,
  { ownedByThisProcess }: { ownedByThisProcess: boolean },
): Promise<void> {
  const note: CreationNote = { createdAt: new Date().toISOString() };
  if (ownedByThisProcess) Object.assign(note, { host: hostname(), pid: process.pid });
  const text = JSON.stringify(note).replaceAll("'", "''");
  await sql.unsafe(`COMMENT ON DATABASE ${quote(name)} IS '${text}'`);
}

/** Best effort: drops test databases and templates that earlier processes left behind. */
async function dropStaleDatabases(sql: postgres.Sql): Promise<void> {
  try {
    const rows = await sql<{ datname: string; note: string | null }[]>`
      SELECT datname, shobj_description(oid, 'pg_database') AS note FROM pg_database
      WHERE datname LIKE ${`${TEST_DATABASE_PREFIX}%`} OR datname LIKE ${`${TEMPLATE_PREFIX}%`}`;
    for (const { datname, note } of rows) {
      if (IDENTIFIER.test(datname) && isLeftOver(note)) {
        await sql.unsafe(`DROP DATABASE IF EXISTS ${quote(datname)} WITH (FORCE)`);
      }
    }
  } catch {
    // Someone else dropped it first, or we lack the right: not this test's problem.
  }
}

/** Whether a database's owner process has exited (same host only), or it is simply old. */
function isLeftOver(comment: string | null): boolean {
  let note: Partial<CreationNote>;
  try {
    note = JSON.parse(comment ?? '') as Partial<CreationNote>;
  } catch {
    return false; // Not created by these helpers: leave it alone.
  }
  if (note.pid !== undefined && note.host === hostname() && !processExists(note.pid)) return true;
  const createdAt = Date.parse(note.createdAt ?? '');
  return Number.isFinite(createdAt) && Date.now() - createdAt > STALE_AFTER_MS;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `work` on one connection to the maintenance database, then closes it. */
async function withAdmin<T>(adminUrl: string, work: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  // One connection: the advisory lock is per session, and CREATE DATABASE needs no pool.
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    return await work(sql);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** A database name as an SQL identifier; only the plain names these helpers generate are allowed. */
function quote(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`not a plain database name: "${name}"`);
  return `"${name}"`;
}

/** `length` random characters from [a-z0-9]. */
function randomId(length: number): string {
  const bytes = randomBytes(length);
  return Array.from(bytes, (b) => (b % 36).toString(36)).join('');
}

/**
 * Cleanup after a test run of the databases `@sluice/db/testing` named after the run: the migrated
 * template `sluice_tpl_<run id>` that the test files cloned (and a half-built one, should a test
 * process have died while migrating it). Best effort; older leftovers are removed by the testing
 * helpers themselves after a few hours.
 */
import { step } from './log.mjs';
import { findExecutable, run } from './process.mjs';
import { postgresBinDirs } from './postgres.mjs';

/**
 * @param {string} databaseUrl the run's DATABASE_URL
 * @param {string} runId the run's SLUICE_TEST_RUN_ID (lower-case letters and digits)
 */
export async function dropRunDatabases(databaseUrl, runId) {
  const psql = findExecutable('psql', postgresBinDirs());
  if (!psql || !/^[a-z0-9]+$/.test(runId)) return;
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const query = (statement) =>
    run(psql, ['-X', '-A', '-t', '-q', '-d', admin.toString(), '-c', statement], { quiet: true });

  const listed = await query(
    `SELECT datname FROM pg_database WHERE datname LIKE 'sluice\\_tpl\\_${runId}%'`,
  );
  if (listed.code !== 0) return;
  const names = listed.output.split('\n').filter((name) => /^[a-z0-9_]+$/.test(name));
  for (const name of names) await query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  if (names.length > 0) step(`dropped this run's template database${names.length > 1 ? 's' : ''}`);
}

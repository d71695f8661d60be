/**
 * Making sure PostgreSQL is reachable and the application database exists: the server DATABASE_URL
 * names, the one on the default port, or a private cluster started for as long as the script runs.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { aptInstall } from './apt.mjs';
import { atExit } from './cleanup.mjs';
import { PrepareError, step } from './log.mjs';
import { canConnect, freePort, probeTcp } from './net.mjs';
import { findExecutable, run } from './process.mjs';

/** The database the services use when DATABASE_URL does not name one. */
const APP_DATABASE = 'sluice';

/**
 * @param {{ needBinaries?: boolean }} options `needBinaries` installs initdb and pg_ctl even when a
 *   running server is found, because the tests start private clusters of their own.
 * @returns {Promise<{ name: 'postgres', url: string, private: boolean, stop(): Promise<void> }>}
 *   `url` names the application database; `stop` ends only a private cluster
 */
export async function ensurePostgres({ needBinaries = false } = {}) {
  if (needBinaries) await serverBinaries('the fault tests');
  const configured = process.env.DATABASE_URL;
  if (configured) {
    await checkConfiguredServer(configured);
    await ensureDatabase(configured);
    step(`postgres: using DATABASE_URL ${redact(configured)}`);
    return shared(configured);
  }
  const port = defaultPort();
  const problem = await defaultServerProblem(port);
  if (problem === undefined) {
    const url = `postgres://postgres@127.0.0.1:${port}/${APP_DATABASE}`;
    await ensureDatabase(url);
    step(`postgres: using ${url}`);
    return shared(url);
  }
  step(`postgres: none usable on 127.0.0.1:${port} (${problem}); starting a private cluster`);
  return startPrivateCluster();
}

/** A server someone else runs: we use it and never stop it. */
function shared(url) {
  return { name: 'postgres', url, private: false, stop: async () => {} };
}

/** The default port; SLUICE_DEFAULT_PG_PORT overrides it (used to test the fallback). */
function defaultPort() {
  const raw = process.env.SLUICE_DEFAULT_PG_PORT;
  if (raw === undefined || raw === '') return 5432;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new PrepareError(`SLUICE_DEFAULT_PG_PORT must be a port number, got "${raw}"`);
  }
  return port;
}

async function checkConfiguredServer(configured) {
  let url;
  try {
    url = new URL(configured);
  } catch {
    throw new PrepareError(`DATABASE_URL "${redact(configured)}" is not a valid URL`);
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new PrepareError(`DATABASE_URL must start with postgres:// (got ${url.protocol}//…)`);
  }
  // A URL without a host connects through a Unix socket (?host=/path); only pg_isready can tell.
  if (url.hostname) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = url.port ? Number(url.port) : 5432;
    try {
      await probeTcp({ host, port, timeoutMs: 3000 });
    } catch (error) {
      throw new PrepareError(
        `DATABASE_URL ${redact(configured)} is not reachable: ${error.message}`,
      );
    }
  }
  const isReady = findPostgresTool('pg_isready');
  if (isReady) {
    const result = await run(isReady, ['-d', configured, '-t', '5'], { quiet: true });
    if (result.code !== 0) {
      throw new PrepareError(
        `DATABASE_URL ${redact(configured)} is not ready: ${result.output.trim()}`,
      );
    }
  }
}

/** Why the default local server cannot be used, or undefined when user postgres can log in. */
async function defaultServerProblem(port) {
  if (!(await canConnect('127.0.0.1', port))) return 'connection refused';
  const login = await psql(`postgres://postgres@127.0.0.1:${port}/postgres`, 'SELECT 1');
  return login.code === 0 ? undefined : `user postgres cannot log in: ${firstLine(login.output)}`;
}

/** Creates the database a URL names when it does not exist yet. */
async function ensureDatabase(databaseUrl) {
  const probe = await psql(databaseUrl, 'SELECT 1');
  if (probe.code === 0) return;
  if (!/database ".*" does not exist/.test(probe.output)) {
    throw new PrepareError(`cannot connect to ${redact(databaseUrl)}: ${probe.output.trim()}`);
  }
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const create = await psql(url.toString(), `CREATE DATABASE "${name.replaceAll('"', '""')}"`);
  if (create.code !== 0) {
    throw new PrepareError(`cannot create database ${name}: ${create.output.trim()}`);
  }
  step(`postgres: created database ${name}`);
}

/** Runs one statement with psql (installed with the client package when missing). */
async function psql(url, statement) {
  let binary = findPostgresTool('psql');
  if (!binary) {
    await aptInstall(['postgresql-client'], 'checking the database');
    binary = findPostgresTool('psql');
  }
  if (!binary) throw new PrepareError('psql is still missing after apt-get install');
  return run(
    binary,
    ['-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-d', url, '-c', statement],
    {
      quiet: true,
    },
  );
}

/**
 * Debian keeps the server programs (initdb, pg_ctl) in /usr/lib/postgresql/<version>/bin, off the
 * PATH; the newest version wins.
 */
export function postgresBinDirs() {
  const root = '/usr/lib/postgresql';
  let versions = [];
  try {
    versions = readdirSync(root).filter((v) => /^\d+$/.test(v));
  } catch {
    return [];
  }
  return versions.sort((a, b) => Number(b) - Number(a)).map((v) => path.join(root, v, 'bin'));
}

function findPostgresTool(name) {
  return findExecutable(name, postgresBinDirs());
}

/** Paths of initdb and pg_ctl, installing the `postgresql` package when they are missing. */
async function serverBinaries(why) {
  const find = () => ({ initdb: findPostgresTool('initdb'), pgCtl: findPostgresTool('pg_ctl') });
  let tools = find();
  if (!tools.initdb || !tools.pgCtl) {
    await aptInstall(['postgresql'], why);
    tools = find();
  }
  if (!tools.initdb || !tools.pgCtl) {
    throw new PrepareError('initdb/pg_ctl are still missing after apt-get install postgresql');
  }
  return tools;
}

/**
 * How to run a command as the owner of the cluster. initdb and pg_ctl refuse to run as root, so
 * root runs them as the `postgres` OS user (which the postgresql package creates).
 */
function clusterOwner(dir) {
  if (process.getuid?.() !== 0) return { wrap: (command, args) => [command, args] };
  const id = (flag) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const uid = id('-u');
  const gid = id('-g');
  if (uid.status !== 0 || gid.status !== 0) {
    throw new PrepareError('running as root, and there is no "postgres" OS user to run initdb as');
  }
  const chown = spawnSync('chown', ['-R', `${uid.stdout.trim()}:${gid.stdout.trim()}`, dir]);
  if (chown.status !== 0) throw new PrepareError(`cannot chown ${dir} to the postgres user`);
  return { wrap: (command, args) => ['runuser', ['-u', 'postgres', '--', command, ...args]] };
}

async function startPrivateCluster() {
  const { initdb, pgCtl } = await serverBinaries('a private PostgreSQL cluster');
  // Under /tmp rather than the repository: the postgres OS user must be able to reach it.
  const baseDir = mkdtempSync('/tmp/sluice-pg-');
  const dataDir = path.join(baseDir, 'data');
  const logPath = path.join(baseDir, 'postgres.log');
  const owner = clusterOwner(baseDir);
  // cwd: the postgres user may not be allowed into the directory we were started from.
  const runAsOwner = (command, args, options = {}) =>
    run(...owner.wrap(command, args), { quiet: true, cwd: baseDir, ...options });
  const stopSync = (mode) => {
    const [command, args] = owner.wrap(pgCtl, ['-D', dataDir, '-m', mode, '-w', 'stop']);
    spawnSync(command, args, { stdio: 'ignore', cwd: baseDir });
  };
  const forget = atExit(() => {
    stopSync('immediate');
    rmSync(baseDir, { recursive: true, force: true });
  });
  const fail = (message) => {
    stopSync('immediate');
    rmSync(baseDir, { recursive: true, force: true });
    forget();
    throw new PrepareError(message);
  };

  const init = await runAsOwner(initdb, [
    '-D',
    dataDir,
    '-U',
    'postgres',
    '-A',
    'trust',
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  if (init.code !== 0) fail(`initdb failed:\n${init.output}`);

  // The port is free when we look and taken when we bind only if someone races us; try again then.
  let port;
  for (let attempt = 1; port === undefined; attempt++) {
    const candidate = await freePort();
    const options = `-p ${candidate} -k /tmp -c listen_addresses=127.0.0.1`;
    // detached: the postmaster stays out of the terminal's process group, so a Ctrl-C meant for
    // the services does not stop the database under them; stop() ends it afterwards.
    const start = await runAsOwner(
      pgCtl,
      ['-D', dataDir, '-l', logPath, '-o', options, '-w', '-t', '60', 'start'],
      { detached: true },
    );
    if (start.code === 0) port = candidate;
    else if (attempt === 3) fail(`pg_ctl start failed:\n${start.output}\n${tail(logPath)}`);
  }

  const url = `postgres://postgres@127.0.0.1:${port}/${APP_DATABASE}`;
  await ensureDatabase(url).catch((error) => fail(error.message));
  step(`postgres: private cluster ${url} (data ${dataDir})`);
  return {
    name: 'postgres',
    url,
    private: true,
    async stop() {
      await runAsOwner(pgCtl, ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
      rmSync(baseDir, { recursive: true, force: true });
      forget();
      step('postgres: stopped the private cluster');
    },
  };
}

function tail(file) {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}

function firstLine(text) {
  return text.trim().split('\n')[0] ?? '';
}

/** A URL for messages, without its password. */
function redact(url) {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

/**
 * Making sure a NATS server with JetStream is reachable: the one NATS_URL names, the one on the
 * default port, or a private `nats-server -js` started for as long as the script runs.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { aptInstall } from './apt.mjs';
import { atExit } from './cleanup.mjs';
import { PrepareError, step } from './log.mjs';
import { freePort, readNatsInfo, waitFor } from './net.mjs';
import { exitCode, findExecutable } from './process.mjs';
import { repoRoot } from './repo.mjs';

/** Debian installs nats-server to /usr/sbin, which is not on every user's PATH. */
const NATS_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin', '/usr/bin'];

/**
 * @param {{ needBinary?: boolean }} options `needBinary` installs nats-server even when a running
 *   server is found, because the tests start private servers of their own.
 * @returns {Promise<{ name: 'nats', url: string, private: boolean, stop(): Promise<void> }>}
 *   `stop` ends only a private server
 */
export async function ensureNats({ needBinary = false } = {}) {
  if (needBinary) await natsServerBinary('the fault tests');
  const configured = process.env.NATS_URL;
  if (configured) {
    await checkConfiguredServer(configured);
    step(`nats: using NATS_URL ${redact(configured)}`);
    return shared(configured);
  }
  const port = defaultPort();
  const problem = await jetStreamProblem('127.0.0.1', port);
  if (problem === undefined) {
    const url = `nats://127.0.0.1:${port}`;
    step(`nats: using ${url}`);
    return shared(url);
  }
  step(`nats: no JetStream server on 127.0.0.1:${port} (${problem}); starting a private one`);
  return startPrivateNats();
}

/** A server someone else runs: we use it and never stop it. */
function shared(url) {
  return { name: 'nats', url, private: false, stop: async () => {} };
}

/** The default port; SLUICE_DEFAULT_NATS_PORT overrides it (used to test the fallback). */
function defaultPort() {
  const raw = process.env.SLUICE_DEFAULT_NATS_PORT;
  if (raw === undefined || raw === '') return 4222;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new PrepareError(`SLUICE_DEFAULT_NATS_PORT must be a port number, got "${raw}"`);
  }
  return port;
}

async function checkConfiguredServer(configured) {
  // NATS_URL may list several servers ("nats://a:4222,nats://b:4222"); the first must answer.
  const first = configured.split(',')[0].trim();
  let url;
  try {
    url = new URL(first.includes('://') ? first : `nats://${first}`);
  } catch {
    throw new PrepareError(`NATS_URL "${redact(configured)}" is not a valid URL`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = url.port ? Number(url.port) : 4222;
  if (url.protocol === 'ws:' || url.protocol === 'wss:') return; // No INFO line to read there.
  const problem = await jetStreamProblem(host, port);
  if (problem !== undefined) {
    throw new PrepareError(`NATS_URL ${redact(first)} is not usable: ${problem}`);
  }
}

/** Why host:port is not a NATS server with JetStream, or undefined when it is one. */
async function jetStreamProblem(host, port) {
  let info;
  try {
    info = await readNatsInfo(host, port);
  } catch (error) {
    return error.code === 'ECONNREFUSED' ? 'connection refused' : error.message;
  }
  return info.jetstream === true ? undefined : 'the server runs without JetStream (-js)';
}

/** Path of nats-server, installed with apt-get when missing. */
async function natsServerBinary(why) {
  const found = findExecutable('nats-server', NATS_DIRS);
  if (found) return found;
  await aptInstall(['nats-server'], why);
  const installed = findExecutable('nats-server', NATS_DIRS);
  if (!installed) throw new PrepareError('nats-server is still missing after apt-get install');
  return installed;
}

/** How often a private nats-server is started on a fresh port when its port was taken first. */
const START_ATTEMPTS = 3;

/**
 * A nats-server with JetStream of this process's own on a free port, with a store under .sluice/,
 * stopped and removed by `stop()` or when the process exits.
 *
 * The port is free when picked and may be taken before the server binds it (other runs on the
 * machine start private servers too): the server then exits, and is started again on another port.
 * Until it does, the one answering on that port is someone else's, so readiness is the INFO of a
 * server with this start's own name.
 */
export async function startPrivateNats() {
  const binary = await natsServerBinary('a private NATS server');
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsOnce(binary, await freePort());
    } catch (error) {
      if (!(error instanceof ExitedEarly) || attempt === START_ATTEMPTS) {
        throw new PrepareError(
          `the private nats-server did not start: ${error.message}\n${error.log}`,
        );
      }
      step(`nats: ${error.message} (its port taken meanwhile?); trying another port`);
    }
  }
}

/** A private nats-server exited before it answered (on a port taken meanwhile, say). */
class ExitedEarly extends Error {
  fatal = true; // Ends waitFor at once.
}

async function startNatsOnce(binary, port) {
  const storeDir = path.join(repoRoot, '.sluice', `nats-${port}`);
  const logPath = `${storeDir}.log`;
  const serverName = `sluice-private-${process.pid}-${port}-${randomBytes(4).toString('hex')}`;
  mkdirSync(storeDir, { recursive: true });
  const logFd = openSync(logPath, 'a');
  // Its own process group: a Ctrl-C meant for the services must not take the server down before
  // they finish shutting down; stop() ends it afterwards. The log is named on the command line
  // (`-l`), where `npm test` looks for it should the server die (server-loss.mjs); its stdout and
  // stderr (a Go panic) go to the same file.
  const options = {
    '-a': '127.0.0.1',
    '-p': String(port),
    '-sd': storeDir,
    '-n': serverName,
    '-l': logPath,
  };
  const child = spawn(binary, ['-js', ...Object.entries(options).flat()], {
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  let status;
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve((status = exitCode(code, signal))));
  });
  const removeFiles = () => {
    rmSync(storeDir, { recursive: true, force: true });
    rmSync(logPath, { force: true });
  };
  const forget = atExit(() => {
    child.kill('SIGKILL');
    removeFiles();
  });

  try {
    await waitFor(
      async () => {
        if (status !== undefined) throw new ExitedEarly(`nats-server exited with status ${status}`);
        const info = await readNatsInfo('127.0.0.1', port);
        return info.server_name === serverName && info.jetstream === true;
      },
      { what: `nats-server on port ${port}` },
    );
  } catch (error) {
    error.log = readFileSync(logPath, 'utf8').split('\n').slice(-15).join('\n');
    child.kill('SIGKILL');
    await exited;
    removeFiles();
    forget();
    throw error;
  }

  const url = `nats://127.0.0.1:${port}`;
  step(`nats: private nats-server ${url} (store ${path.relative(repoRoot, storeDir)})`);
  return {
    name: 'nats',
    url,
    private: true,
    async stop() {
      if (status === undefined) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      removeFiles();
      forget();
      step('nats: stopped the private nats-server');
    },
  };
}

/** A URL for messages, without its password or token. */
function redact(url) {
  return url.replace(/\/\/[^@/]*@/g, '//***@');
}

import { spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
} from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/** Options of {@link startPostgresServer}. */
export interface StartPostgresServerOptions {
  /** TCP port on 127.0.0.1; a free one by default. Restarts keep it either way. */
  port?: number;
}

/** A private PostgreSQL cluster owned by one test. */
export interface PostgresServer extends AsyncDisposable {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication). */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** Whether the postmaster is running. */
  readonly running: boolean;
  /** Fast shutdown (`pg_ctl stop -m fast`): clients are disconnected, data is checkpointed. */
  stop(): Promise<void>;
  /**
   * Without a signal: a crash, the postmaster and all its processes killed with SIGKILL, so the
   * next start runs crash recovery. With one: sent to the postmaster alone (SIGTERM smart, SIGINT
   * fast, SIGQUIT immediate shutdown). Waits until the processes are gone.
   */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Stops the cluster if it runs, then starts it again on the same port and data directory. */
  restart(): Promise<void>;
}

const START_TIMEOUT_S = 60;
const POLL_INTERVAL_MS = 25;

/** Clusters still running when the test process exits are stopped then, so none outlives it. */
const exitActions = new Set<() => void>();
process.on('exit', () => {
  for (const action of exitActions) action();
});

/**
 * Starts a private PostgreSQL cluster: `initdb` into a fresh directory under /tmp (run as the
 * `postgres` OS user when we are root, since initdb and pg_ctl refuse root), trust authentication,
 * listening on 127.0.0.1 only. Dispose it (`await using`) to stop it and remove its files.
 */
export async function startPostgresServer(
  options: StartPostgresServerOptions = {},
): Promise<PostgresServer> {
  const tools = findServerTools();
  // Under /tmp, which the postgres OS user can reach, unlike many working directories.
  const baseDir = await mkdtemp('/tmp/sluice-pg-');
  const server = new PrivateCluster(tools, baseDir, options.port);
  try {
    await server.init();
    await server.start();
  } catch (error) {
    await server[Symbol.asyncDispose]();
    throw error;
  }
  return server;
}

interface ServerTools {
  initdb: string;
  pgCtl: string;
}

/** initdb and pg_ctl from one directory: PATH first, then Debian's /usr/lib/postgresql/<v>/bin. */
function findServerTools(): ServerTools {
  const pathDirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  let versioned: string[] = [];
  try {
    versioned = readdirSync('/usr/lib/postgresql')
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
      .map((v) => path.join('/usr/lib/postgresql', v, 'bin'));
  } catch {
    // Not a Debian-style installation.
  }
  for (const dir of [...pathDirs, ...versioned]) {
    const tools = { initdb: path.join(dir, 'initdb'), pgCtl: path.join(dir, 'pg_ctl') };
    if (isExecutable(tools.initdb) && isExecutable(tools.pgCtl)) return tools;
  }
  throw new Error(
    'initdb/pg_ctl not found (PATH, /usr/lib/postgresql/*/bin); `npm test` installs them',
  );
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** How to run a command as the cluster's owner: ourselves, or the postgres OS user for root. */
function asOwner(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0
    ? ['runuser', ['-u', 'postgres', '--', command, ...args]]
    : [command, args];
}

class PrivateCluster implements PostgresServer {
  readonly dataDir: string;
  readonly #tools: ServerTools;
  readonly #baseDir: string;
  #port: number | undefined;
  readonly #exitAction = () => {
    this.#pgCtlSync(['-m', 'immediate', 'stop']);
    rmSync(this.#baseDir, { recursive: true, force: true });
  };

  constructor(tools: ServerTools, baseDir: string, port: number | undefined) {
    this.#tools = tools;
    this.#baseDir = baseDir;
    this.dataDir = path.join(baseDir, 'data');
    this.#port = port;
    exitActions.add(this.#exitAction);
  }

  get port(): number {
    if (this.#port === undefined) throw new Error('the cluster has not started yet');
    return this.#port;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.#postmasterPid() !== undefined;
  }

  async init(): Promise<void> {
    if (process.getuid?.() === 0) {
      const chown = spawnSync('chown', ['postgres:postgres', this.#baseDir]);
      if (chown.status !== 0) {
        throw new Error(`cannot hand ${this.#baseDir} to the postgres OS user (does it exist?)`);
      }
    }
    const args = ['-D', this.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'];
    await this.#run(this.#tools.initdb, args, 'initdb');
  }

  async start(): Promise<void> {
    if (this.running) throw new Error('the cluster is already running');
    this.#removeStaleLockFiles();
    // A port found free can be taken before the postmaster binds it; pick another then.
    const fixedPort = this.#port !== undefined;
    for (let attempt = 1; ; attempt++) {
      const port = this.#port ?? (await freePort());
      const options = `-p ${port} -k ${this.#baseDir} -c listen_addresses=127.0.0.1`;
      const args = ['-D', this.dataDir, '-l', this.#logPath(), '-o', options];
      try {
        await this.#run(
          this.#tools.pgCtl,
          [...args, '-w', '-t', String(START_TIMEOUT_S), 'start'],
          'pg_ctl start',
        );
        this.#port = port;
        return;
      } catch (error) {
        if (fixedPort || attempt === 3) throw error;
      }
    }
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    await this.#run(
      this.#tools.pgCtl,
      ['-D', this.dataDir, '-m', 'fast', '-w', 'stop'],
      'pg_ctl stop',
    );
  }

  async kill(signal?: NodeJS.Signals): Promise<void> {
    const postmaster = this.#postmasterPid();
    if (postmaster === undefined) return;
    // Listed before the postmaster dies: afterwards they are no longer recognisable as its children.
    const victims = signal === undefined ? [postmaster, ...childrenOf(postmaster)] : [postmaster];
    for (const pid of victims) {
      try {
        process.kill(pid, signal ?? 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    const deadline = Date.now() + START_TIMEOUT_S * 1000;
    while (victims.some(isAlive)) {
      if (Date.now() > deadline)
        throw new Error(`postgres processes ${victims.join(', ')} did not exit`);
      await delay(POLL_INTERVAL_MS);
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops the cluster (fast, else immediate) and removes its directory. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.stop();
    } catch {
      await this.kill();
    }
    exitActions.delete(this.#exitAction);
    await rm(this.#baseDir, { recursive: true, force: true });
  }

  /** The postmaster's pid while it is alive, from the first line of postmaster.pid. */
  #postmasterPid(): number | undefined {
    const pid = this.#lockFilePid();
    return pid !== undefined && this.#isOurPostmaster(pid) ? pid : undefined;
  }

  /**
   * Whether `pid` is this cluster's live postmaster. A lock file left by a killed postmaster names
   * a pid the system hands out again (pid_max is 32,768 here, and a long test run wraps it): the
   * process living under it now may be anything — once it was the machine's nats-server, which
   * `kill()` then killed. A postmaster works in its data directory, so its cwd tells it apart.
   */
  #isOurPostmaster(pid: number): boolean {
    if (!isAlive(pid)) return false;
    try {
      return readlinkSync(`/proc/${pid}/cwd`) === realpathSync(this.dataDir);
    } catch {
      return false; // exited meanwhile, or not ours to look into
    }
  }

  #lockFilePid(): number | undefined {
    return lockFileOwner(path.join(this.dataDir, 'postmaster.pid'));
  }

  /**
   * After a crash the lock files (postmaster.pid, and one per socket) name a dead postmaster.
   * Postgres ignores them only once that pid is gone entirely, but the killed postmaster is not our
   * child: it stays a zombie until init reaps it, which takes seconds here and may never happen in
   * a container without an init. A zombie holds no shared memory, so the files are safe to remove.
   */
  #removeStaleLockFiles(): void {
    const socketLocks = readdirSync(this.#baseDir)
      .filter((f) => f.startsWith('.s.PGSQL.') && f.endsWith('.lock'))
      .map((f) => path.join(this.#baseDir, f));
    for (const file of [path.join(this.dataDir, 'postmaster.pid'), ...socketLocks]) {
      const pid = lockFileOwner(file);
      if (pid !== undefined && !this.#isOurPostmaster(pid)) rmSync(file, { force: true });
    }
  }

  async #run(command: string, args: string[], what: string): Promise<void> {
    const [file, fullArgs] = asOwner(command, args);
    // cwd: the postgres user may not be allowed into the directory the tests started in.
    const child = spawn(file, fullArgs, { cwd: this.#baseDir, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) {
      const log = await readFile(this.#logPath(), 'utf8').catch(() => '');
      const tail = log.split('\n').slice(-15).join('\n');
      throw new Error(
        `${what} failed (exit ${code}):\n${output}${tail ? `\nserver log:\n${tail}` : ''}`,
      );
    }
  }

  #pgCtlSync(args: string[]): void {
    const [file, fullArgs] = asOwner(this.#tools.pgCtl, ['-D', this.dataDir, '-w', ...args]);
    spawnSync(file, fullArgs, { cwd: this.#baseDir, stdio: 'ignore' });
  }

  #logPath(): string {
    return path.join(this.#baseDir, 'postgres.log');
  }
}

/** The pid on the first line of a Postgres lock file, if the file exists. */
function lockFileOwner(file: string): number | undefined {
  try {
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a process exists and is not a zombie (the postmaster is not our child, so init reaps it). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Pids whose parent is `pid`, from /proc (Linux). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the parenthesised command name: state, ppid, …
      const [, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) === pid) children.push(Number(entry));
    } catch {
      // Exited while we looked.
    }
  }
  return children;
}

/** A TCP port that was free on 127.0.0.1 a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port assigned'));
      });
    });
  });
}

import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, openSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { summarizeServerLog } from './server-log.js';

/** Options of {@link startNatsServer}. */
export interface StartNatsServerOptions {
  /** JetStream store directory, kept on dispose; a fresh temporary one, removed then, by default. */
  storeDir?: string;
  /** Client port; one the server picks (`-p -1`) when omitted. Restarts keep it either way. */
  port?: number;
  /** How long to wait for connections and JetStream to be ready; 20 s by default. */
  startTimeoutMs?: number;
  /**
   * Told when the server's process ends without being asked to (a crash, a signal from
   * elsewhere), with its exit code or signal and the last lines of its log: the services of a
   * test then fail with connection timeouts, which say nothing of why. Default: a line on stderr,
   * which the test runner shows beside the failure.
   */
  onUnexpectedExit?: (report: string) => void;
  /**
   * A configuration file the server reads (`-c`), e.g. for users and their permissions; the
   * options above override what it says. {@link NatsServer.reload} makes the server read it again.
   */
  configFile?: string;
}

/** A private `nats-server -js` owned by one test. */
export interface NatsServer extends AsyncDisposable {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** The HTTP monitoring port (`/healthz`, `/jsz`, `/varz`). */
  readonly monitorPort: number;
  readonly storeDir: string;
  /** Whether the process is running. */
  readonly running: boolean;
  /** Its process id while it runs. */
  readonly pid: number | undefined;
  /** Sends a signal (SIGKILL by default: a crash) and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Shuts the server down cleanly and waits for it; the store stays for {@link restart}. */
  stop(): Promise<void>;
  /**
   * Suspends the process (SIGSTOP): connections stay open but nothing answers, as with a server
   * stuck in a long pause. {@link thaw} resumes it; stopping a frozen server thaws it first.
   */
  freeze(): void;
  /** Resumes a frozen process (SIGCONT). */
  thaw(): void;
  /** Stops the server if it runs, then starts it again on the same port and store. */
  restart(): Promise<void>;
  /**
   * Makes the running server read its configuration file again (SIGHUP), as an operator's
   * `nats-server --signal reload` does; it applies the change without waiting for anything.
   */
  reload(): void;
}

/** Debian installs nats-server to /usr/sbin, which is not on every PATH. */
const SEARCH_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin', '/usr/bin'];
const POLL_INTERVAL_MS = 25;
const STOP_GRACE_MS = 10_000;

/** Servers still running when the test process exits are killed then, so none outlives it. */
const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/**
 * Starts a private `nats-server` with JetStream on 127.0.0.1 and resolves once it accepts clients
 * and JetStream is ready. It never touches the machine's shared server. Dispose it (`await using`)
 * to stop it and remove its temporary files.
 */
export async function startNatsServer(options: StartNatsServerOptions = {}): Promise<NatsServer> {
  const binary = findNatsServer();
  const runDir = await mkdtemp(path.join(tmpdir(), 'sluice-nats-'));
  const server = new PrivateNatsServer(binary, runDir, options);
  try {
    await server.start();
  } catch (error) {
    await server[Symbol.asyncDispose]();
    throw error;
  }
  return server;
}

function findNatsServer(): string {
  const pathDirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  for (const dir of [...pathDirs, ...SEARCH_DIRS]) {
    const candidate = path.join(dir, 'nats-server');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Keep looking.
    }
  }
  throw new Error('nats-server not found on PATH or in /usr/sbin; `npm test` installs it');
}

class PrivateNatsServer implements NatsServer {
  readonly storeDir: string;
  readonly #binary: string;
  /** Holds the ports file (how we learn the ports the server picked) and the log. */
  readonly #runDir: string;
  readonly #startTimeoutMs: number;
  readonly #configFile: string | undefined;
  #port: number | undefined;
  #monitorPort: number | undefined;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  /** Set while this object stops or kills the process, so that exit is expected. */
  #ending = false;
  readonly #onUnexpectedExit: (report: string) => void;

  constructor(binary: string, runDir: string, options: StartNatsServerOptions) {
    this.#binary = binary;
    this.#runDir = runDir;
    this.storeDir = options.storeDir ?? path.join(runDir, 'store');
    this.#port = options.port;
    this.#startTimeoutMs = options.startTimeoutMs ?? 20_000;
    this.#configFile = options.configFile;
    this.#onUnexpectedExit =
      options.onUnexpectedExit ?? ((report) => process.stderr.write(`${report}\n`));
  }

  get port(): number {
    if (this.#port === undefined) throw new Error('the server has not started yet');
    return this.#port;
  }

  get monitorPort(): number {
    if (this.#monitorPort === undefined) throw new Error('the server has not started yet');
    return this.#monitorPort;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Spawns the process and waits for readiness; the first start learns the chosen ports. */
  async start(): Promise<void> {
    if (this.#child) throw new Error('the server is already running');
    const args = [
      ...(this.#configFile === undefined ? [] : ['-c', this.#configFile]),
      '-js',
      '-a',
      '127.0.0.1',
      '-p',
      String(this.#port ?? -1),
      '-m',
      String(this.#monitorPort ?? -1),
      '-sd',
      this.storeDir,
      '--ports_file_dir',
      this.#runDir,
    ];
    const logFd = openSync(this.#logPath(), 'a');
    const child = spawn(this.#binary, args, { stdio: ['ignore', logFd, logFd] });
    closeSync(logFd);
    // Not keeping the test process alive: a forgotten server is killed by the exit hook instead.
    child.unref();
    running.add(child);
    this.#child = child;
    let exitedEarly = false;
    let started = false;
    this.#ending = false;
    this.#exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        exitedEarly = true;
        running.delete(child);
        if (this.#child === child) this.#child = undefined;
        // One that fails to start says so in start()'s error instead.
        if (started && !this.#ending) void this.#reportUnexpectedExit(code, signal);
        resolve();
      });
    });

    const deadline = Date.now() + this.#startTimeoutMs;
    const fail = async (reason: string): Promise<never> => {
      await this.kill('SIGKILL');
      const log = await readFile(this.#logPath(), 'utf8').catch(() => '');
      throw new Error(`private nats-server ${reason}\n${summarizeServerLog(log)}`);
    };
    for (;;) {
      if (exitedEarly) return fail('exited during start');
      if (Date.now() > deadline) return fail(`not ready within ${this.#startTimeoutMs} ms`);
      if (await this.#ready(child.pid)) {
        started = true;
        return;
      }
      await delay(POLL_INTERVAL_MS);
    }
  }

  /**
   * Ready when the ports file of this process exists (the server writes it once its listeners are
   * up) and `/healthz`, which on a JetStream server also checks that JetStream is running, is ok.
   */
  async #ready(pid: number | undefined): Promise<boolean> {
    const portsFile = (await readdir(this.#runDir)).find((f) => f.endsWith(`_${pid}.ports`));
    if (portsFile === undefined) return false;
    let ports: { nats?: string[]; monitoring?: string[] };
    try {
      ports = JSON.parse(
        await readFile(path.join(this.#runDir, portsFile), 'utf8'),
      ) as typeof ports;
    } catch {
      return false; // Being written right now.
    }
    const client = ports.nats?.[0];
    const monitor = ports.monitoring?.[0];
    if (client === undefined || monitor === undefined) return false;
    this.#port = Number(new URL(client).port);
    this.#monitorPort = Number(new URL(monitor).port);
    try {
      const response = await fetch(`http://127.0.0.1:${this.#monitorPort}/healthz`, {
        signal: AbortSignal.timeout(1000),
      });
      return response.ok && ((await response.json()) as { status?: string }).status === 'ok';
    } catch {
      return false;
    }
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.#child;
    if (!child) return;
    child.ref(); // Keep the process alive while we wait for the exit.
    this.#ending = true;
    child.kill(signal);
    await this.#exited;
  }

  freeze(): void {
    if (!this.#child) throw new Error('the server is not running');
    this.#child.kill('SIGSTOP');
  }

  thaw(): void {
    this.#child?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    child.kill('SIGCONT'); // A frozen server cannot act on SIGTERM.
    const escalate = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await this.kill('SIGTERM');
    clearTimeout(escalate);
  }

  reload(): void {
    if (!this.#child) throw new Error('the server is not running');
    this.#child.kill('SIGHUP');
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops the server and removes its files; a store directory the caller chose is kept. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
    await rm(this.#runDir, { recursive: true, force: true });
  }

  async #reportUnexpectedExit(code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    const log = await readFile(this.#logPath(), 'utf8').catch(() => '');
    const how = signal === null ? `with code ${String(code)}` : `on ${signal}`;
    this.#onUnexpectedExit(
      `private nats-server on port ${String(this.#port)} exited ${how}, not asked to; its log:\n` +
        summarizeServerLog(log),
    );
  }

  #logPath(): string {
    return path.join(this.#runDir, 'nats-server.log');
  }
}

/**
 * A Sluice service started as a real child process, as deploy/run-service.sh starts it (from its
 * bundle: @sluice/service-bundles), with its JSON log lines parsed so tests can wait for what it
 * reports.
 *
 * Stopping one checks its whole output for secrets (test/support/secrets.ts): a service that
 * printed an API key, an LLM key or a password fails the stop, and so the test file that ran it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SecretLeakError, findSecretLeaks } from './secrets.js';
import { serviceNodeArgs } from '@sluice/service-bundles';

/** The repository root. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** One parsed log line (pino JSON), or the raw text when a line is not JSON. */
export type LogLine = Record<string, unknown> & { msg?: string; raw?: string };

/** What to start. */
export interface ServiceProcessOptions {
  /** Name for messages, e.g. `executor-llm`. */
  readonly name: string;
  /** `gateway`, `scheduler`, `executor` or `governor`. */
  readonly service: string;
  readonly args?: readonly string[];
  readonly env: Record<string, string>;
  /** Print the child's output as it comes (for debugging), default off. */
  readonly echo?: boolean;
}

/** Errors a stopped service's log is summarised with (see `reportErrorLines`). */
const MAX_ERROR_LINES_REPORTED = 5;

/** How long a stop waits, after the exit, for the last output lines to be read. */
const OUTPUT_DRAIN_MS = 2_000;

/**
 * Set, each service started here (by the tests and the benchmarks) writes a V8 CPU profile into
 * `<dir>/<service name>/` when it exits: a `.cpuprofile` for Chrome DevTools. Node refuses
 * `--cpu-prof` in `NODE_OPTIONS`, hence a variable of our own.
 */
export const CPU_PROFILE_DIR_VARIABLE = 'SLUICE_CPU_PROFILE_DIR';

function cpuProfileArgs(name: string): string[] {
  const dir = process.env[CPU_PROFILE_DIR_VARIABLE];
  if (!dir) return [];
  return ['--cpu-prof', `--cpu-prof-dir=${path.join(path.resolve(dir), name)}`];
}

/** A running (or exited) service process. */
export class ServiceProcess {
  readonly lines: LogLine[] = [];
  /** Every stdout line as written (what {@link lines} parses), for checks on the raw text. */
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when the child's stdout and stderr are closed: every line has been read. */
  private readonly closed: Promise<void>;
  private readonly child: ChildProcess;
  private readonly watchers = new Set<() => void>();

  /**
   * Starts the process.
   *
   * @throws Error for a bundled service whose bundle is missing or stale (@sluice/service-bundles):
   *   `await ensureServiceBundles()` first, as `startStack` does.
   */
  constructor(readonly options: ServiceProcessOptions) {
    const nodeArgs = [...cpuProfileArgs(options.name), ...serviceNodeArgs(options.service)];
    this.child = spawn(process.execPath, [...nodeArgs, ...(options.args ?? [])], {
      cwd: REPO_ROOT,
      env: { PATH: process.env['PATH'] ?? '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.notify();
        resolve({ code, signal });
      }),
    );
    this.closed = new Promise((resolve) => this.child.once('close', () => resolve()));
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (options.echo) console.log(`[${options.name}] ${line}`);
      this.stdout.push(line);
      this.lines.push(parseLine(line));
      this.notify();
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => {
      if (options.echo) console.error(`[${options.name}!] ${line}`);
      this.stderr.push(line);
      this.notify();
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Waits until a log line matches, and returns it. Fails early when the process exits first,
   * with its stderr in the message.
   */
  async waitForLine(match: (line: LogLine) => boolean, timeoutMs = 30_000): Promise<LogLine> {
    return this.waitFor(
      () => this.lines.find(match),
      timeoutMs,
      'log line',
      () =>
        `last lines:\n${this.lines
          .slice(-5)
          .map((l) => JSON.stringify(l))
          .join('\n')}\nstderr:\n${this.stderr.slice(-10).join('\n')}`,
    );
  }

  /**
   * Waits until a line of its stderr from index `from` on (`stderr.length` before asking for it)
   * matches, and returns it. Fails early when the process exits first.
   */
  async waitForStderrLine(
    match: (line: string) => boolean,
    { from = 0, timeoutMs = 30_000 }: { from?: number; timeoutMs?: number } = {},
  ): Promise<string> {
    return this.waitFor(
      () => this.stderr.slice(from).find(match),
      timeoutMs,
      'stderr line',
      () => `last stderr lines:\n${this.stderr.slice(-10).join('\n')}`,
    );
  }

  /** Waits for the line with message `msg` (e.g. `gateway started`). */
  waitForMessage(msg: string, timeoutMs?: number): Promise<LogLine> {
    return this.waitForLine((line) => line.msg === msg, timeoutMs);
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.running) this.child.kill(signal);
  }

  /**
   * Stops it with SIGTERM, escalating to SIGKILL after `graceMs`; resolves with the exit once its
   * output is read to the end.
   *
   * @throws SecretLeakError when a line of its output holds a registered secret or an API key
   *   (see {@link assertNoSecretLeaks}); the process is stopped all the same.
   */
  async stop(graceMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) {
      this.kill('SIGTERM');
      const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
      try {
        await this.exited;
      } finally {
        clearTimeout(timer);
      }
    }
    const exit = await this.exited;
    await this.outputRead();
    this.assertNoSecretLeaks();
    this.reportErrorLines();
    return exit;
  }

  /**
   * Prints a short line for each of the first few errors the service logged: a test that failed
   * because of one (an `INTERNAL` answer, say) then shows why in CI's output, where the services'
   * own output is not kept. Tests of failures make services log errors on purpose; a few lines
   * each is the price.
   */
  private reportErrorLines(): void {
    const errors = this.lines.filter(
      (line) => line['level'] === 'error' || line['level'] === 'fatal',
    );
    for (const line of errors.slice(0, MAX_ERROR_LINES_REPORTED)) {
      const err = line['err'] as { type?: string; message?: string; code?: string } | undefined;
      const cause = err
        ? ` — ${String(err.type)}${err.code ? ` ${String(err.code)}` : ''}: ${String(err.message)}`
        : '';
      console.error(`[${this.options.name} logged] ${String(line.msg)}${cause}`.slice(0, 400));
    }
    if (errors.length > MAX_ERROR_LINES_REPORTED) {
      console.error(
        `[${this.options.name} logged] … ${errors.length - MAX_ERROR_LINES_REPORTED} more errors`,
      );
    }
  }

  /**
   * Throws a {@link SecretLeakError} naming this service and the offending lines (secrets masked)
   * when its output so far holds a secret of test/support/secrets.ts.
   */
  assertNoSecretLeaks(): void {
    const leaks = findSecretLeaks({ stdout: this.stdout, stderr: this.stderr });
    if (leaks.length > 0) throw new SecretLeakError(this.options.name, leaks);
  }

  /** Waits (briefly: a grandchild may hold the pipes) until the output is read to its end. */
  private async outputRead(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.closed,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, OUTPUT_DRAIN_MS))),
    ]);
    clearTimeout(timer);
  }

  /** Waits until `find` finds something in the output, the process exits, or time runs out. */
  private async waitFor<T>(
    find: () => T | undefined,
    timeoutMs: number,
    what: string,
    lastOutput: () => string,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = find();
      if (found !== undefined) return found;
      if (!this.running) {
        throw new Error(
          `${this.options.name} exited before the expected ${what}:\n${this.stderr.join('\n')}`,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `${this.options.name}: no matching ${what} within ${timeoutMs} ms; ${lastOutput()}`,
        );
      }
      await this.changed(left);
    }
  }

  private changed(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.watchers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.watchers.add(done);
    });
  }

  private notify(): void {
    for (const watcher of [...this.watchers]) watcher();
  }
}

function parseLine(line: string): LogLine {
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value === 'object' && value !== null) return value as LogLine;
  } catch {
    // not JSON: keep the text
  }
  return { raw: line };
}

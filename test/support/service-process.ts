/**
 * A Sluice service started as a real child process (`node --import tsx services/<x>/src/main.ts`),
 * with its JSON log lines parsed so tests can wait for what it reports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

/** A running (or exited) service process. */
export class ServiceProcess {
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private readonly watchers = new Set<() => void>();

  constructor(readonly options: ServiceProcessOptions) {
    const entry = path.join(REPO_ROOT, 'services', options.service, 'src', 'main.ts');
    this.child = spawn(process.execPath, ['--import', 'tsx', entry, ...(options.args ?? [])], {
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
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (options.echo) console.log(`[${options.name}] ${line}`);
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
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find(match);
      if (found) return found;
      if (!this.running) {
        throw new Error(
          `${this.options.name} exited before the expected log line:\n${this.stderr.join('\n')}`,
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `${this.options.name}: no matching log line within ${timeoutMs} ms; last lines:\n` +
            this.lines
              .slice(-5)
              .map((l) => JSON.stringify(l))
              .join('\n') +
            `\nstderr:\n${this.stderr.slice(-10).join('\n')}`,
        );
      }
      await this.changed(left);
    }
  }

  /** Waits for the line with message `msg` (e.g. `gateway started`). */
  waitForMessage(msg: string, timeoutMs?: number): Promise<LogLine> {
    return this.waitForLine((line) => line.msg === msg, timeoutMs);
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.running) this.child.kill(signal);
  }

  /** Stops it with SIGTERM, escalating to SIGKILL after `graceMs`; resolves with the exit. */
  async stop(graceMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.running) return this.exited;
    this.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
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

/**
 * The services of `npm start` as child processes: started together, their output handed over line
 * by line, ready once each has logged `<service> started`, stopped together.
 *
 * Each child runs in its own process group, so a Ctrl-C at the terminal (or the group signal that
 * scripts/start.mjs forwards) reaches only this supervisor, which then sends every service exactly
 * one SIGTERM. A service that got the terminal's SIGINT and our SIGTERM as well would take the
 * second signal as "exit now" and skip its clean shutdown.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { serviceNodeArgs } from '@sluice/service-bundles';

/** One service to run. */
export interface ServiceSpec {
  /** Shown in front of its output, e.g. `executor-llm`. */
  readonly name: string;
  /** The folder under `services/`: `gateway`, `scheduler`, `governor` or `executor`. */
  readonly service: string;
  readonly args?: readonly string[];
}

/** How a service ended. */
export interface ServiceExit {
  readonly name: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** What the group needs besides the specs. */
export interface ServiceGroupOptions {
  /** The repository root: the services run in it. */
  readonly root: string;
  readonly env: NodeJS.ProcessEnv;
  /** Receives every line a service writes, as it comes. */
  readonly onLine: (name: string, line: string, stream: 'stdout' | 'stderr') => void;
}

interface Member {
  readonly spec: ServiceSpec;
  readonly child: ChildProcess;
  readonly exited: Promise<ServiceExit>;
  /** The `<service> started` log record, once seen. */
  started?: Record<string, unknown>;
  /** Called whenever the member logged its start line or exited. */
  notify?: () => void;
}

/** A set of running services. */
export class ServiceGroup {
  private readonly members: Member[];
  /** Resolves with the first service to exit, whatever the reason. */
  readonly firstExit: Promise<ServiceExit>;

  constructor(specs: readonly ServiceSpec[], options: ServiceGroupOptions) {
    this.members = specs.map((spec) => startMember(spec, options));
    this.firstExit = Promise.race(this.members.map((m) => m.exited));
    // Last resort: if this process ends without stopping them (a crash), the services go too.
    process.once('exit', () => this.kill());
  }

  /**
   * Resolves, by service name, with each service's `<service> started` log record once all have
   * logged one. Rejects when a service exits first or `timeoutMs` passes.
   */
  ready(timeoutMs: number): Promise<Map<string, Record<string, unknown>>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const late = this.members.filter((m) => !m.started).map((m) => m.spec.name);
        done(new Error(`not started within ${timeoutMs / 1000}s: ${late.join(', ')}`));
      }, timeoutMs);
      const done = (error?: Error) => {
        clearTimeout(timer);
        for (const member of this.members) delete member.notify;
        if (error) reject(error);
        else resolve(new Map(this.members.map((m) => [m.spec.name, m.started ?? {}])));
      };
      const check = () => {
        const gone = this.members.find((m) => !m.started && !isRunning(m.child));
        if (gone) {
          const code = gone.child.exitCode ?? gone.child.signalCode;
          return done(new Error(`${gone.spec.name} exited (${code}) before it had started`));
        }
        if (this.members.every((m) => m.started)) done();
      };
      for (const member of this.members) member.notify = check;
      check();
    });
  }

  /**
   * Stops every service still running with one SIGTERM, and SIGKILLs those still running after
   * `graceMs`. Resolves with every service's exit, in start order.
   */
  async stop(graceMs: number): Promise<ServiceExit[]> {
    for (const member of this.members) signal(member.child, 'SIGTERM');
    const timer = setTimeout(() => this.kill(), graceMs);
    try {
      return await Promise.all(this.members.map((m) => m.exited));
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILLs every service still running (a second Ctrl-C, or a stop that hangs). */
  kill(): void {
    for (const member of this.members) signal(member.child, 'SIGKILL');
  }
}

function startMember(spec: ServiceSpec, options: ServiceGroupOptions): Member {
  // As deploy/run-service.sh starts it: from its bundle (built beforehand).
  const child = spawn(process.execPath, [...serviceNodeArgs(spec.service), ...(spec.args ?? [])], {
    cwd: options.root,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const member: Member = {
    spec,
    child,
    exited: new Promise((resolve) => {
      // 'close' rather than 'exit': by then every line of its output has been handed over.
      child.once('close', (code, signal) => {
        resolve({ name: spec.name, code, signal });
        member.notify?.();
      });
    }),
  };
  const startedMessage = `${spec.service} started`;
  createInterface({ input: child.stdout }).on('line', (line) => {
    options.onLine(spec.name, line, 'stdout');
    if (!member.started && line.includes(startedMessage)) {
      const record = parseRecord(line);
      if (record?.['msg'] === startedMessage) {
        member.started = record;
        member.notify?.();
      }
    }
  });
  createInterface({ input: child.stderr }).on('line', (line) =>
    options.onLine(spec.name, line, 'stderr'),
  );
  // A failure to spawn at all ends like an exit; the 'close' above still fires.
  child.on('error', (error) =>
    options.onLine(spec.name, `cannot start: ${error.message}`, 'stderr'),
  );
  return member;
}

function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function signal(child: ChildProcess, name: NodeJS.Signals): void {
  if (isRunning(child)) child.kill(name);
}

function parseRecord(line: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(line) as unknown;
    return typeof value === 'object' && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

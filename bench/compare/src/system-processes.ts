/**
 * The processes of a system under test, sampled: the bench process itself and what the system's
 * `processes()` names (its services, its Postgres backends, the machine's shared servers), found
 * again every second, since a pool opens backends and a stack starts workers while it runs. The
 * footprint scenario reads memory and CPU per phase from it, end to end the CPU of a window.
 */
import { FootprintSampler } from './footprint-sampler.js';
import type { QueueSystem, SystemProcess } from './system.js';

/** The role of the bench process: the client, and the workers where a system runs them here. */
export const BENCH_ROLE = 'bench process';

/** How often `processes()` is asked again (it may run a query). */
const REFRESH_INTERVAL_MS = 1_000;

export class SystemProcesses {
  readonly sampler = new FootprintSampler();
  /** The first process seen of each role, for its flags (shared, runs workers). */
  readonly seen = new Map<string, SystemProcess>();
  #refreshError: string | undefined;
  #refresher: NodeJS.Timeout | undefined;

  constructor(private readonly system: QueueSystem) {
    this.sampler.track({ role: BENCH_ROLE, pid: process.pid });
  }

  /** Tracks what `processes()` names now; a failure is kept for the notes, not thrown. */
  async refresh(): Promise<void> {
    if (!this.system.processes) return;
    try {
      for (const p of await this.system.processes()) {
        if (!this.seen.has(p.role)) this.seen.set(p.role, p);
        this.sampler.track({
          role: p.role,
          pid: p.pid,
          withDescendants: p.withDescendants,
          memory: p.privateMemory === true ? 'private' : 'rss',
          cpuFromStart: p.countFromStart,
        });
      }
    } catch (error) {
      this.#refreshError ??= error instanceof Error ? error.message : String(error);
    }
  }

  /** Finds the processes, then samples them and finds them again until {@link stop}. */
  async start(): Promise<void> {
    await this.startFinding();
    this.sampler.start();
  }

  /**
   * Finds the processes, and again every second until {@link stop}, without sampling them in
   * between: for CPU between two marks, where a sample every 250 ms would only add the bench
   * process's own work to what it measures.
   */
  async startFinding(): Promise<void> {
    await this.refresh();
    this.#refresher ??= setInterval(() => void this.refresh(), REFRESH_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.#refresher);
    this.#refresher = undefined;
    this.sampler.stop();
  }

  /** The first failure of `processes()`, if any. */
  get refreshError(): string | undefined {
    return this.#refreshError;
  }

  /** Whether the system's workers run in the bench process (no process of its own says so). */
  get workersInBench(): boolean {
    return ![...this.seen.values()].some((p) => p.runsWorkers === true);
  }

  /** What the bench process is called in a result. */
  roleName(role: string): string {
    if (role !== BENCH_ROLE) return role;
    return this.workersInBench ? 'bench process (client + workers)' : 'client';
  }

  /** Whether a role counts in the system's totals: its processes, and the bench process if it works. */
  counted(role: string): boolean {
    return role !== BENCH_ROLE || this.workersInBench;
  }

  /** CPU seconds of one role in `cpu`, or of the system's totals (see {@link counted}). */
  cpuOf(cpu: ReadonlyMap<string, number>, role?: string): number {
    return [...cpu]
      .filter(([r]) => (role === undefined ? this.counted(r) : r === role))
      .reduce((sum, [, seconds]) => sum + seconds, 0);
  }
}

/**
 * CPU per job while jobs arrive at a steady rate (end to end): the CPU time of each of the
 * system's processes, and of the whole machine, between the moment a quarter of the measured jobs
 * had started and the moment three quarters had, divided by the jobs that started in between. The
 * ramp-up and the tail stay outside the window. At a steady rate a system pays for every wake-up,
 * round trip and commit that a drain shares between many jobs, so this is where its cost per job
 * shows (the footprint scenario measures the drain's).
 *
 * The machine's figure counts everything that ran meanwhile (the kernel's threads too); the
 * system's total counts its processes, and the bench process only where the workers run in it.
 */
import { machineBusySeconds, type CpuMark } from './footprint-sampler.js';
import type { Figure } from './scenario.js';
import type { SystemProcesses } from './system-processes.js';

/** Where the window opens and closes, as shares of the measured jobs started. */
const WINDOW_OPENS = 0.25;
const WINDOW_CLOSES = 0.75;

interface Reading {
  readonly started: number;
  readonly cpu: CpuMark;
  readonly machineSeconds: number;
}

/** What the window measured. */
export interface CpuPerJob {
  /** Jobs started within the window. */
  readonly jobs: number;
  /** Milliseconds of CPU per job, by role as the result names it. */
  readonly byRole: ReadonlyMap<string, number>;
  /** The system's total (see the module comment). */
  readonly system: number;
  /** The whole machine's. */
  readonly machine: number;
}

/**
 * Something else measured over the window's jobs (the server's work: postgres-work.ts; wake-ups:
 * wake-ups.ts), told right after the window's own reading of the processes.
 */
export interface WindowListener {
  opened(started: number): void;
  closed(started: number): void;
}

export class CpuPerJobWindow {
  #opened: Reading | undefined;
  #measured: CpuPerJob | undefined;

  constructor(
    private readonly processes: SystemProcesses,
    /** How many measured jobs the run sends. */
    private readonly jobs: number,
    /** Told the starts when the window opens and closes, to measure over the same jobs. */
    private readonly listeners: readonly WindowListener[] = [],
  ) {}

  /**
   * Told how many measured jobs have started (as often as the caller likes): opens the window at
   * a quarter and closes it at three quarters or later.
   */
  observe(started: number): void {
    if (this.#measured !== undefined) return;
    if (this.#opened === undefined) {
      if (started >= this.jobs * WINDOW_OPENS) {
        this.#opened = this.read(started);
        for (const listener of this.listeners) listener.opened(started);
      }
      return;
    }
    if (started < this.jobs * WINDOW_CLOSES || started <= this.#opened.started) return;
    const closed = this.read(started);
    for (const listener of this.listeners) listener.closed(started);
    const jobs = closed.started - this.#opened.started;
    const cpu = this.processes.sampler.cpuSince(this.#opened.cpu);
    const perJob = (seconds: number) => (seconds * 1_000) / jobs;
    this.#measured = {
      jobs,
      byRole: new Map(
        [...cpu].map(([role, seconds]) => [this.processes.roleName(role), perJob(seconds)]),
      ),
      system: perJob(this.processes.cpuOf(cpu)),
      machine: perJob(closed.machineSeconds - this.#opened.machineSeconds),
    };
  }

  /** What was measured, once the window has closed. */
  get measured(): CpuPerJob | undefined {
    return this.#measured;
  }

  /** The result's figures: none while the window has not closed. */
  figures(): Figure[] {
    const m = this.#measured;
    if (m === undefined) return [];
    return [
      { key: 'cpu_per_job', label: 'CPU per job', value: m.system, unit: 'ms' },
      { key: 'machine_cpu_per_job', label: 'machine CPU per job', value: m.machine, unit: 'ms' },
      { key: 'cpu_window_jobs', label: 'jobs in the CPU window', value: m.jobs, unit: 'jobs' },
      ...[...m.byRole].map(([role, value]) => ({
        key: `cpu_per_job:${role}`,
        label: `CPU per job, ${role}`,
        value,
        unit: 'ms',
      })),
    ];
  }

  /** One line for the result's notes. */
  note(): string {
    const m = this.#measured;
    if (m === undefined) {
      return 'CPU per job: the run was too short for a window between a quarter and three quarters of the starts';
    }
    const roles = [...m.byRole]
      .sort(([, a], [, b]) => b - a)
      .map(([role, ms]) => `${role} ${ms.toFixed(2)}`)
      .join(', ');
    return `CPU per job (ms) over ${m.jobs} starts between a quarter and three quarters of the run: the system ${m.system.toFixed(2)}, the machine ${m.machine.toFixed(2)}; ${roles}`;
  }

  private read(started: number): Reading {
    return { started, cpu: this.processes.sampler.mark(), machineSeconds: machineBusySeconds() };
  }
}

/**
 * Wake-ups per job while jobs arrive at a steady rate (end to end): how often each of the system's
 * processes went to sleep and was woken again — the voluntary context switches of all its threads,
 * which the kernel counts exactly — between the moments a {@link CpuPerJobWindow} opens and closes,
 * per job started in between.
 *
 * At a steady rate most of a task's CPU on a two-core virtual machine is the cost of its hops: a
 * process wakes for a message, a reply or a timer, does a little, and sleeps again (docs/benchmarks,
 * readings 20 and 24). CPU per task moves by ±10 % between runs of the same code; the count of
 * wake-ups moves far less, so a change that takes a hop off a task's path shows in one run, as a
 * change of statements shows in the WAL (postgres-work.ts). A thread pool's hand-off counts too:
 * a worker thread wakes to do the work and the event loop wakes for its completion.
 *
 * Linux only: `/proc/<pid>/task/<tid>/status`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { WindowListener } from './cpu-per-job.js';
import type { Figure } from './scenario.js';
import type { SystemProcesses } from './system-processes.js';

/** Voluntary context switches of the thread whose `status` this is, or 0 where it says none. */
export function voluntarySwitchesOfStatus(status: string): number {
  const match = /^voluntary_ctxt_switches:\s*(\d+)$/m.exec(status);
  return match === null ? 0 : Number(match[1]);
}

/**
 * The voluntary context switches of every living thread of `pid`, summed; undefined when the
 * process is gone. A thread that ended took its count with it: a process whose threads come and go
 * (rare in these servers) reads low.
 */
export function wakeUpsOf(pid: number): number | undefined {
  let threads: string[];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let total = 0;
  for (const thread of threads) {
    try {
      total += voluntarySwitchesOfStatus(
        readFileSync(`/proc/${pid}/task/${thread}/status`, 'utf8'),
      );
    } catch {
      // The thread ended meanwhile.
    }
  }
  return total;
}

/** Wake-ups of each process at one moment, by pid, with its role. */
type WakeUpMark = ReadonlyMap<number, { readonly role: string; readonly wakeUps: number }>;

/**
 * Wake-ups by role between two marks, per job. A process alive at the close but not at the open
 * started within the window, and counts from its start; one gone by the close is left out (its
 * count went with it).
 */
export function wakeUpsPerJob(
  opened: WakeUpMark,
  closed: WakeUpMark,
  jobs: number,
): Map<string, number> {
  if (jobs <= 0) throw new Error(`wake-ups per job over ${jobs} jobs`);
  const byRole = new Map<string, number>();
  for (const [pid, { role, wakeUps }] of closed) {
    const since = wakeUps - (opened.get(pid)?.wakeUps ?? 0);
    byRole.set(role, (byRole.get(role) ?? 0) + Math.max(0, since) / jobs);
  }
  return byRole;
}

/**
 * Reads the wake-ups of the system's processes as the CPU window opens and closes, of the
 * processes the window's own reading found alive (it is told right after that reading).
 */
export class WakeUpWindow implements WindowListener {
  #opened: { readonly started: number; readonly mark: WakeUpMark } | undefined;
  #measured: { readonly jobs: number; readonly byRole: Map<string, number> } | undefined;

  constructor(
    private readonly processes: SystemProcesses,
    /** Reads one process's count (tests replace it). */
    private readonly read: (pid: number) => number | undefined = wakeUpsOf,
  ) {}

  opened(started: number): void {
    this.#opened ??= { started, mark: this.mark() };
  }

  closed(started: number): void {
    if (this.#opened === undefined || this.#measured !== undefined) return;
    const jobs = started - this.#opened.started;
    if (jobs <= 0) return;
    this.#measured = { jobs, byRole: wakeUpsPerJob(this.#opened.mark, this.mark(), jobs) };
  }

  /** The result's figures: none while the window has not closed. */
  figures(): Figure[] {
    if (this.#measured === undefined) return [];
    return [...this.#measured.byRole].map(([role, value]) => ({
      key: `wake_ups_per_job:${this.processes.roleName(role)}`,
      label: `wake-ups per job, ${this.processes.roleName(role)}`,
      value,
      unit: 'wake-ups',
    }));
  }

  /** One line for the result's notes; none while the window has not closed. */
  note(): string | undefined {
    if (this.#measured === undefined) return undefined;
    const roles = [...this.#measured.byRole]
      .sort(([, a], [, b]) => b - a)
      .map(([role, count]) => `${this.processes.roleName(role)} ${count.toFixed(1)}`)
      .join(', ');
    return `Wake-ups per job over the same starts (voluntary context switches of every thread): ${roles}`;
  }

  private mark(): WakeUpMark {
    const mark = new Map<number, { role: string; wakeUps: number }>();
    for (const [pid, role] of this.processes.sampler.livingProcesses()) {
      const wakeUps = this.read(pid);
      if (wakeUps !== undefined) mark.set(pid, { role, wakeUps });
    }
    return mark;
  }
}

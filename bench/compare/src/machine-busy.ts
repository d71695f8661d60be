/**
 * How busy the whole machine was over a stretch of a run, as a share of all its cores: every
 * process and the kernel's own threads, from /proc/stat. The priority scenario reports it for the
 * time its high-priority jobs arrive, so a reader can tell a wait spent queueing for a core from a
 * wait the system imposes (session 40: Sluice's P0 waits under the backlog with the machine 93–97 %
 * busy, and 62–69 % in the idle phase).
 */
import { machineBusySeconds, readProcStat as procStatNow } from './footprint-sampler.js';

/** The CPUs /proc/stat counts in its `cpu` line: one `cpuN` line each. */
export function coresOfProcStat(procStat: string): number {
  const cores = procStat.split('\n').filter((line) => /^cpu\d+ /.test(line)).length;
  if (cores === 0) throw new Error('no cpuN line in /proc/stat');
  return cores;
}

/**
 * Busy CPU seconds over wall seconds on `cores` cores, in percent. It can read a little above 100
 * over a short stretch: /proc/stat counts in clock ticks (10 ms a core), not in the instants the
 * stretch began and ended.
 */
export function busyPercent(busySeconds: number, wallSeconds: number, cores: number): number {
  if (!(wallSeconds > 0) || !(cores > 0) || !(busySeconds >= 0)) {
    throw new RangeError(
      `no busy share of ${busySeconds} s busy in ${wallSeconds} s on ${cores} cores`,
    );
  }
  return (100 * busySeconds) / (wallSeconds * cores);
}

/** Reads the machine's busy time now, and answers its busy share since when asked. */
export class MachineBusyWindow {
  readonly #startedAtMs: number;
  readonly #busyAtStart: number;

  constructor(
    private readonly readProcStat: () => string = procStatNow,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    this.#startedAtMs = this.nowMs();
    this.#busyAtStart = machineBusySeconds(this.readProcStat());
  }

  /** The machine's busy share (%) since the window was opened. */
  percentSoFar(): number {
    const procStat = this.readProcStat();
    const wallSeconds = (this.nowMs() - this.#startedAtMs) / 1_000;
    return busyPercent(
      machineBusySeconds(procStat) - this.#busyAtStart,
      wallSeconds,
      coresOfProcStat(procStat),
    );
  }
}

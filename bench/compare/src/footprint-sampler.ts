/**
 * Samples the memory and CPU time of a set of OS processes from /proc (issue 7, footprint): every
 * ~250 ms it reads `/proc/<pid>/status` (resident memory) and `/proc/<pid>/stat` (user + system
 * CPU time in clock ticks) of each tracked process — and, where asked, of its descendants, e.g.
 * the esbuild service a `node --import tsx` process starts. It keeps the peak resident memory of
 * each role (the sum over its processes at one sample) and tells the CPU seconds each role spent
 * between a {@link CpuMark} and now. Processes that exit are tolerated: their last reading counts.
 * Linux only (there is no /proc elsewhere).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/** How often the sampler reads /proc by default. */
export const SAMPLE_INTERVAL_MS = 250;
/** Clock ticks per second when `getconf CLK_TCK` cannot tell (Linux's USER_HZ is 100). */
const DEFAULT_TICKS_PER_SECOND = 100;

/** One reading of one process. */
export interface ProcessReading {
  /** `VmRSS`: resident memory, shared pages included. */
  readonly rssBytes: number;
  /** `VmHWM`: the peak of `VmRSS` since the process started. */
  readonly hwmBytes: number;
  /**
   * `RssAnon`: resident memory of the process's own (anonymous) pages — what a Postgres backend
   * uses beyond the shared buffers every backend maps.
   */
  readonly privateBytes: number;
  /** User + system CPU time since the process started. */
  readonly cpuSeconds: number;
}

/** A process to sample, and how its memory counts. */
export interface SampledProcess {
  /** What it is, e.g. `gateway`, `postgres backends`; processes of one role are summed. */
  readonly role: string;
  readonly pid: number;
  /** Sample its descendants too, under the same role (default false). */
  readonly withDescendants?: boolean;
  /** `rss` (default) counts `VmRSS`; `private` counts `RssAnon` (see {@link ProcessReading}). */
  readonly memory?: 'rss' | 'private';
  /**
   * Count its CPU time from its start when it is first seen after a mark (default: from its
   * first reading), for processes whose whole life belongs to the measured work.
   */
  readonly cpuFromStart?: boolean;
}

/** What the sampler knows of one role. */
export interface RoleFootprint {
  readonly role: string;
  /** Processes of the role seen since tracking began (descendants included). */
  readonly processes: number;
  /** Memory of the role at the latest sample (its live processes summed). */
  readonly currentBytes: number;
  /** The highest {@link currentBytes} of any sample since {@link FootprintSampler.resetPeaks}. */
  readonly peakBytes: number;
  /** Memory of the role at its first sample. */
  readonly firstBytes: number;
}

/** CPU seconds of every process at one moment; {@link FootprintSampler.cpuSince} counts from it. */
export type CpuMark = ReadonlyMap<number, number>;

let ticksPerSecond: number | undefined;

/** The kernel's clock ticks per second (`getconf CLK_TCK`, normally 100), read once. */
export function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    try {
      const value = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
      ticksPerSecond = Number.isInteger(value) && value > 0 ? value : DEFAULT_TICKS_PER_SECOND;
    } catch {
      ticksPerSecond = DEFAULT_TICKS_PER_SECOND;
    }
  }
  return ticksPerSecond;
}

/** A `kB` field of /proc/<pid>/status in bytes (0 when absent, as for kernel threads). */
function statusKb(status: string, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
  return match?.[1] === undefined ? 0 : Number(match[1]) * 1024;
}

/**
 * utime + stime of a /proc/<pid>/stat line, in ticks. The command name (field 2) may hold spaces
 * and parentheses, so the fields are counted from its last `)`: utime and stime are fields 14 and
 * 15, the 12th and 13th after it.
 */
export function cpuTicksOfStat(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) throw new Error('malformed stat line');
  return utime + stime;
}

/**
 * The machine's busy time in the `cpu` line of /proc/stat, in ticks: user, nice, system, irq and
 * softirq (guest time is inside user already; idle, iowait and steal are not this machine's work).
 */
export function busyTicksOfProcStat(procStat: string): number {
  const line = procStat.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) throw new Error('no cpu line in /proc/stat');
  const [user, nice, system, , , irq, softirq] = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = [user, nice, system, irq, softirq];
  if (!busy.every((n) => Number.isFinite(n))) throw new Error('malformed cpu line in /proc/stat');
  return busy.reduce((sum: number, n) => sum + (n as number), 0);
}

/** The machine's /proc/stat as it reads now. */
export function readProcStat(): string {
  return readFileSync('/proc/stat', 'utf8');
}

/**
 * CPU seconds the whole machine has been busy since it booted, summed over its cores: every
 * process and the kernel's own threads, those no system names included. From `procStat` when the
 * caller has read /proc/stat already (machine-busy.ts also counts its cores), else read now.
 */
export function machineBusySeconds(procStat = readProcStat()): number {
  return busyTicksOfProcStat(procStat) / clockTicksPerSecond();
}

/**
 * One reading of `pid`, or undefined when it does not exist (anymore). Synchronous: reading /proc
 * never waits for a disk, and a sample read at once costs a fraction of one through the thread
 * pool — the sampler runs inside the bench process it measures.
 */
export function readProcess(pid: number): ProcessReading | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return {
      rssBytes: statusKb(status, 'VmRSS'),
      hwmBytes: statusKb(status, 'VmHWM'),
      privateBytes: statusKb(status, 'RssAnon'),
      cpuSeconds: cpuTicksOfStat(stat) / clockTicksPerSecond(),
    };
  } catch {
    return undefined;
  }
}

/** Every living descendant of `pid` (children of all its threads, recursively). */
export function descendantsOf(pid: number): number[] {
  const found: number[] = [];
  let parents = [pid];
  while (parents.length > 0) {
    const children: number[] = [];
    for (const parent of parents) {
      let tasks: string[];
      try {
        tasks = readdirSync(`/proc/${parent}/task`);
      } catch {
        continue;
      }
      for (const task of tasks) {
        let text = '';
        try {
          text = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
        } catch {
          // The thread or the process ended meanwhile.
        }
        for (const child of text.split(' ')) if (child.trim() !== '') children.push(Number(child));
      }
    }
    found.push(...children);
    parents = children;
  }
  return found;
}

/** Pids of the processes whose command name (`/proc/<pid>/comm`) is `name`, e.g. `nats-server`. */
export async function pidsNamed(name: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = await readFile(`/proc/${entry}/comm`, 'utf8').catch(() => '');
    if (comm.trim() === name) pids.push(Number(entry));
  }
  return pids;
}

interface ProcessState {
  readonly role: string;
  readonly memory: 'rss' | 'private';
  /** The baseline of marks taken before it was seen: its first reading, or 0. */
  readonly firstCpu: number;
  lastCpu: number;
  /** Memory at the latest reading; 0 once it is gone. */
  bytes: number;
  /** Whether the latest sample found it. */
  alive: boolean;
}

interface RoleState {
  peakBytes: number;
  firstBytes: number | undefined;
  currentBytes: number;
}

/**
 * Samples tracked processes on a timer. All of it is synchronous, so that its own CPU time can be
 * measured exactly (`process.cpuUsage` around each sample) and taken off the process it runs in:
 * the bench process's figures are the bench process's, not the sampler's.
 */
export class FootprintSampler {
  private readonly roots = new Map<number, SampledProcess>();
  private readonly processes = new Map<number, ProcessState>();
  private readonly roles = new Map<string, RoleState>();
  private timer: NodeJS.Timeout | undefined;
  /** CPU seconds this process spent sampling. */
  private ownCpuSeconds = 0;

  constructor(private readonly intervalMs = SAMPLE_INTERVAL_MS) {}

  /** Samples `target` from the next sample on; a pid already tracked is left as it is. */
  track(target: SampledProcess): void {
    if (target.pid > 0 && !this.roots.has(target.pid)) this.roots.set(target.pid, target);
  }

  /** Starts sampling every interval (idempotent). */
  start(): void {
    this.timer ??= setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads every tracked process now. */
  sample(): void {
    const before = process.cpuUsage();
    try {
      this.readAll();
    } finally {
      const spent = process.cpuUsage(before);
      this.ownCpuSeconds += (spent.user + spent.system) / 1e6;
    }
  }

  private readAll(): void {
    const seen = new Set<number>();
    for (const root of this.roots.values()) {
      const pids = [root.pid, ...(root.withDescendants === true ? descendantsOf(root.pid) : [])];
      for (const pid of pids) {
        const reading = readProcess(pid);
        if (reading === undefined) continue;
        seen.add(pid);
        this.record(pid, root, reading);
      }
    }
    const totals = new Map<string, number>();
    for (const root of this.roots.values()) totals.set(root.role, 0);
    for (const [pid, state] of this.processes) {
      state.alive = seen.has(pid);
      if (!state.alive) state.bytes = 0;
      totals.set(state.role, (totals.get(state.role) ?? 0) + state.bytes);
    }
    for (const [role, bytes] of totals) {
      const state = this.roles.get(role) ?? {
        peakBytes: 0,
        firstBytes: undefined,
        currentBytes: 0,
      };
      state.currentBytes = bytes;
      state.peakBytes = Math.max(state.peakBytes, bytes);
      // A role's first sample is the one that found one of its processes.
      if (state.firstBytes === undefined && bytes > 0) state.firstBytes = bytes;
      this.roles.set(role, state);
    }
  }

  private record(pid: number, root: SampledProcess, reading: ProcessReading): void {
    // The sampler's own time is not the bench process's work.
    const cpuSeconds =
      pid === process.pid ? reading.cpuSeconds - this.ownCpuSeconds : reading.cpuSeconds;
    const memory = root.memory ?? 'rss';
    const bytes = memory === 'private' ? reading.privateBytes : reading.rssBytes;
    const state = this.processes.get(pid);
    if (state === undefined) {
      this.processes.set(pid, {
        role: root.role,
        memory,
        firstCpu: root.cpuFromStart === true ? 0 : cpuSeconds,
        lastCpu: cpuSeconds,
        bytes,
        alive: true,
      });
    } else {
      state.lastCpu = cpuSeconds;
      state.bytes = bytes;
    }
  }

  /** Starts the peaks over from the current memory. */
  resetPeaks(): void {
    for (const state of this.roles.values()) state.peakBytes = state.currentBytes;
  }

  /** Takes a sample, and the CPU seconds of every process seen so far. */
  mark(): CpuMark {
    this.sample();
    return new Map([...this.processes].map(([pid, state]) => [pid, state.lastCpu]));
  }

  /**
   * Takes a sample, and tells the CPU seconds each role spent since `mark`. A process first seen
   * after the mark counts from its first reading (its CPU time before that is not known to be of
   * this window: a process started meanwhile spent it starting up), or from its start where it
   * was tracked with `cpuFromStart`.
   */
  cpuSince(mark: CpuMark): Map<string, number> {
    this.sample();
    const cpu = new Map<string, number>();
    for (const root of this.roots.values()) cpu.set(root.role, 0);
    for (const [pid, state] of this.processes) {
      const spent = state.lastCpu - (mark.get(pid) ?? state.firstCpu);
      cpu.set(state.role, (cpu.get(state.role) ?? 0) + Math.max(0, spent));
    }
    return cpu;
  }

  /** CPU seconds the sampler itself has spent (taken off the process it runs in). */
  get ownCpu(): number {
    return this.ownCpuSeconds;
  }

  /**
   * The role of every process the latest sample found alive (a window's listener reads it right
   * after the window's own {@link mark} or {@link cpuSince}, which sampled).
   */
  livingProcesses(): Map<number, string> {
    return new Map(
      [...this.processes]
        .filter(([, state]) => state.alive)
        .map(([pid, state]) => [pid, state.role] as const),
    );
  }

  /** What is known of each role, in the order the roles were first tracked. */
  footprints(): RoleFootprint[] {
    return [...this.roles].map(([role, state]) => ({
      role,
      processes: [...this.processes.values()].filter((p) => p.role === role).length,
      currentBytes: state.currentBytes,
      peakBytes: state.peakBytes,
      firstBytes: state.firstBytes ?? 0,
    }));
  }
}

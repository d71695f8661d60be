/**
 * The kernel's DAMON memory monitor: a fact of the machine that every latency figure is read
 * against.
 *
 * On the benchmark machines a `kdamond` kernel thread samples physical memory every 500 ms and
 * pages out the regions it finds cold (a `pageout` scheme). Idle, a pass stalls every process for
 * 7–9 ms; under a benchmark's load it takes 40–50 ms of a core over ~100 ms, and the pipeline
 * stalls meanwhile: in the priority scenario's idle phase the high jobs' waits rose to 100–160 ms
 * once per pass, every ~0.6 s (docs/benchmarks/history.md, "Session 15").
 * The harness never changes the setting — it is the machine's — but reports whether a monitor ran
 * and how much CPU its threads used during the run, so that a noisy figure can be told from a slow
 * system.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { clockTicksPerSecond, cpuTicksOfStat } from './footprint-sampler.js';

/** Where the kernel exposes DAMON's sysfs interface. */
export const DAMON_ADMIN_DIR = '/sys/kernel/mm/damon/admin/kdamonds';

/** One configured DAMON monitor (a `kdamond` thread while it runs). */
export interface Kdamond {
  /** `on` or `off` (sysfs `state`). */
  readonly state: string;
  /** The thread's pid while it runs. */
  readonly pid: number | undefined;
  /** What it monitors: `paddr` (physical memory), `vaddr`, `fvaddr`. */
  readonly operations: string[];
  /** How often it samples, in µs. */
  readonly sampleUs: number[];
  /** What its schemes do with what they find (`pageout`, `lru_prio`, `stat` …). */
  readonly actions: string[];
}

/** The monitors configured on this machine: none where the kernel has no DAMON sysfs. */
export function readKdamonds(adminDir = DAMON_ADMIN_DIR): Kdamond[] {
  let names: string[];
  try {
    names = readdirSync(adminDir).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  return names.map((name) => {
    const dir = path.join(adminDir, name);
    const contexts = childDirs(path.join(dir, 'contexts'));
    const pid = Number(readText(path.join(dir, 'pid')));
    return {
      state: readText(path.join(dir, 'state')) ?? 'unknown',
      pid: Number.isInteger(pid) && pid > 0 ? pid : undefined,
      operations: contexts.flatMap((c) => optional(readText(path.join(c, 'operations')))),
      sampleUs: contexts.flatMap((c) =>
        optional(readText(path.join(c, 'monitoring_attrs', 'intervals', 'sample_us'))).map(Number),
      ),
      actions: contexts.flatMap((c) =>
        childDirs(path.join(c, 'schemes')).flatMap((s) =>
          optional(readText(path.join(s, 'action'))),
        ),
      ),
    };
  });
}

/** One line for the report: `DAMON on (paddr, pageout, sampling every 500 ms)`, `no DAMON` … */
export function describeKdamonds(kdamonds: readonly Kdamond[]): string {
  if (kdamonds.length === 0) return 'no DAMON monitor';
  return kdamonds
    .map((k) => {
      const details = [
        ...k.operations,
        ...k.actions,
        ...k.sampleUs.map((us) => `sampling every ${formatInterval(us)}`),
      ];
      return `DAMON ${k.state}${details.length > 0 ? ` (${details.join(', ')})` : ''}`;
    })
    .join('; ');
}

/**
 * CPU seconds (user + system) the running monitors' threads have used since they started, or
 * undefined where none runs or their use cannot be read.
 */
export function kdamondCpuSeconds(
  kdamonds: readonly Kdamond[],
  procDir = '/proc',
  ticksPerSecond = clockTicksPerSecond(),
): number | undefined {
  const pids = kdamonds.flatMap((k) => (k.state === 'on' && k.pid !== undefined ? [k.pid] : []));
  if (pids.length === 0) return undefined;
  let ticks = 0;
  for (const pid of pids) {
    const stat = readText(path.join(procDir, String(pid), 'stat'));
    if (stat === undefined) return undefined; // the thread is gone (the monitor was restarted)
    ticks += cpuTicksOfStat(stat);
  }
  return ticks / ticksPerSecond;
}

function formatInterval(us: number): string {
  return us >= 1_000_000 ? `${us / 1_000_000} s` : `${us / 1_000} ms`;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function optional(value: string | undefined): string[] {
  return value === undefined || value === '' ? [] : [value];
}

function childDirs(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => /^\d+$/.test(name))
      .map((name) => path.join(dir, name));
  } catch {
    return [];
  }
}

/** What a benchmark ran on, for its report: figures mean little without the machine. */
import os from 'node:os';

export interface MachineFacts {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly os: string;
  readonly node: string;
  readonly nats: string;
  readonly postgres: string;
  /** 1-minute load averages when the run started and ended: above the core count, it was shared. */
  loadAtStart: number;
  loadAtEnd: number;
}

/**
 * The facts of this machine; `nats` and `postgres` are the versions the servers report (the NATS
 * INFO's `version`, Postgres's `select version()`).
 */
export function machineFacts(nats: string, postgres: string): MachineFacts {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()} (${os.arch()})`,
    node: process.version,
    nats,
    postgres,
    loadAtStart: os.loadavg()[0] ?? Number.NaN,
    loadAtEnd: Number.NaN,
  };
}

/** The 1-minute load average now. */
export function loadNow(): number {
  return os.loadavg()[0] ?? Number.NaN;
}

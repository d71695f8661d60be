/**
 * The machine and server versions every comparison result is recorded with (issue 7): node,
 * nats-server, Postgres, Redis and the core count, and the kernel's memory monitor, whose passes
 * stall the machine (memory-monitor.ts). Builds on bench/overload/machine.ts.
 */
import { connect as connectTcp } from 'node:net';
import { connectNats, closeNats } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { adminDatabaseUrl } from '@sluice/db/testing';
import postgres from 'postgres';
import { loadNow, machineFacts, type MachineFacts } from '../../overload/machine.js';
import {
  describeKdamonds,
  kdamondCpuSeconds,
  readKdamonds,
  type Kdamond,
} from './memory-monitor.js';

export interface CompareMachine extends MachineFacts {
  /** `redis_version` of the machine's Redis at 127.0.0.1:6379, or why it is unknown. */
  readonly redis: string;
  /** Postgres's `fsync` and `synchronous_commit`: what "fsync per commit" rests on. */
  readonly postgresCommit: string;
  /** The kernel's DAMON memory monitor, e.g. `DAMON on (paddr, pageout, sampling every 500 ms)`. */
  readonly memoryMonitor: string;
  /**
   * CPU seconds the monitor's threads used from the start of the run to its end
   * ({@link finishMachine}); undefined while the run lasts, or where none ran.
   */
  memoryMonitorCpuSeconds: number | undefined;
}

/** The monitors seen at the start of each run, and their CPU then. */
const monitorsAtStart = new WeakMap<
  CompareMachine,
  { kdamonds: Kdamond[]; cpuSeconds: number | undefined }
>();

/** Where the machine's Redis listens (the BullMQ adapters use the same). */
export const REDIS_HOST = '127.0.0.1';
export const REDIS_PORT = 6379;

/** The facts of this machine, asking each server for its version (unreachable: `unreachable`). */
export async function compareMachine(): Promise<CompareMachine> {
  const [nats, [pg, postgresCommit], redis] = await Promise.all([
    natsVersion(),
    postgresFacts(),
    redisVersion(),
  ]);
  const kdamonds = readKdamonds();
  const machine: CompareMachine = {
    ...machineFacts(nats, pg),
    redis,
    postgresCommit,
    memoryMonitor: describeKdamonds(kdamonds),
    memoryMonitorCpuSeconds: undefined,
  };
  monitorsAtStart.set(machine, { kdamonds, cpuSeconds: kdamondCpuSeconds(kdamonds) });
  return machine;
}

/** `kernel memory monitor: DAMON on (…), 12.3 CPU s during the run` for the reports. */
export function describeMemoryMonitor(machine: CompareMachine): string {
  const cpu = machine.memoryMonitorCpuSeconds;
  return (
    `kernel memory monitor: ${machine.memoryMonitor}` +
    (cpu === undefined ? '' : `, ${cpu.toFixed(1)} CPU s of it during the run`)
  );
}

/** Reads what is measured at the end of a run: the load average and the memory monitor's CPU. */
export function finishMachine(machine: CompareMachine): CompareMachine {
  machine.loadAtEnd = loadNow();
  const start = monitorsAtStart.get(machine);
  const now = start === undefined ? undefined : kdamondCpuSeconds(start.kdamonds);
  // A monitor restarted meanwhile has a new pid: its CPU then cannot be read, and stays unknown.
  machine.memoryMonitorCpuSeconds =
    now === undefined || start?.cpuSeconds === undefined ? undefined : now - start.cpuSeconds;
  return machine;
}

async function natsVersion(): Promise<string> {
  try {
    const nc = await withTimeout(connectNats({ url: natsUrl(), name: 'bench-compare-facts' }));
    const version = nc.info?.version ?? 'unknown';
    await closeNats(nc);
    return version;
  } catch {
    return 'unreachable';
  }
}

/** The server's version and its commit durability settings. */
async function postgresFacts(): Promise<[version: string, commit: string]> {
  const sql = postgres(adminDatabaseUrl(), { max: 1, onnotice: () => undefined });
  try {
    const [row] = await withTimeout(
      sql<{ v: string; fsync: string; sync: string }[]>`
        select current_setting('server_version') as v, current_setting('fsync') as fsync,
          current_setting('synchronous_commit') as sync`,
    );
    if (!row) return ['unknown', 'unknown'];
    return [row.v, `fsync=${row.fsync}, synchronous_commit=${row.sync}`];
  } catch {
    return ['unreachable', 'unknown'];
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** Asks Redis `INFO server` over a bare socket: no client library needed for one line. */
export function redisVersion(host = REDIS_HOST, port = REDIS_PORT): Promise<string> {
  return new Promise((resolve) => {
    const socket = connectTcp({ host, port });
    let text = '';
    const done = (value: string) => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(2_000, () => done('unreachable'));
    socket.on('error', () => done('unreachable'));
    socket.on('connect', () => socket.write('INFO server\r\n'));
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
      const match = /redis_version:([^\r\n]+)/.exec(text);
      if (match?.[1] !== undefined) done(match[1]);
    });
  });
}

function withTimeout<T>(promise: Promise<T>, ms = 5_000): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms).unref(),
    ),
  ]);
}

/**
 * The processes the adapters name in `processes()` (footprint scenario) that they do not start
 * themselves: the Postgres backends serving a run's database and the machine's shared servers.
 */
import { pidsNamed, readProcess } from '../footprint-sampler.js';
import type { SystemProcess } from '../system.js';

/**
 * Lists the backends connected to the database the query runs in — the run's own database, so
 * these are exactly the connections of the system under test (the server is shared; its
 * background writers, which serve everyone, are not counted).
 */
export const POSTGRES_BACKENDS_QUERY =
  'select pid from pg_stat_activity where datname = current_database()';

/**
 * The backends found by {@link POSTGRES_BACKENDS_QUERY}: their own memory counted, and their CPU
 * time from their start (each was opened for this run's work).
 */
export function postgresBackends(rows: readonly { pid: unknown }[]): SystemProcess[] {
  return rows
    .map((row) => Number(row.pid))
    .filter((pid) => Number.isInteger(pid) && pid > 0)
    .map((pid) => ({ role: 'postgres backends', pid, privateMemory: true, countFromStart: true }));
}

/** The nats-server pids found last, kept while they live: a scan of /proc is not for every second. */
let natsServerPids: number[] = [];

/** The machine's nats-server (shared with everything else on the machine that uses NATS). */
export async function machineNatsServer(): Promise<SystemProcess[]> {
  if (natsServerPids.length === 0 || !natsServerPids.every((pid) => readProcess(pid))) {
    natsServerPids = await pidsNamed('nats-server');
  }
  return natsServerPids.map((pid) => ({
    role: 'nats-server (shared)',
    pid,
    shared: true,
  }));
}

/** The `process_id` of a Redis `INFO` reply, or undefined. */
export function redisProcessId(info: string): number | undefined {
  const pid = Number(/^process_id:(\d+)\r?$/m.exec(info)?.[1]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * A private redis-server for BullMQ's durable tier (issue 7): append-only file, fsync every second
 * (`--appendonly yes --appendfsync everysec`), on a free port with its data in a temporary
 * directory, so the machine's Redis (no persistence) stays untouched and the AOF costs are this
 * run's alone. Stopped and its directory removed by `stop()`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const REDIS_SERVER_BINARY = process.env.REDIS_SERVER ?? '/usr/bin/redis-server';
/** How long the server may take to accept connections. */
const START_TIMEOUT_MS = 10_000;
/** How long a stopping server may take before it is killed. */
const STOP_TIMEOUT_MS = 10_000;

export interface RedisServer {
  readonly host: string;
  readonly port: number;
  /** The data directory (holds the AOF); removed by `stop()`. */
  readonly dir: string;
  /** `redis_version` as the server printed it at start. */
  readonly version: string;
  readonly pid: number;
  /** Shuts the server down (SIGTERM: a final fsync), then removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** Starts a private AOF redis-server; resolves once it accepts connections. */
export async function startRedisServer(): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-bench-redis-'));
  try {
    // A port taken between probing and binding makes the start fail: try another.
    for (let attempt = 1; ; attempt += 1) {
      const port = await freePort();
      try {
        return await launch(port, dir);
      } catch (error) {
        if (attempt >= 3) throw error;
      }
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

async function launch(port: number, dir: string): Promise<RedisServer> {
  const child = spawn(
    REDIS_SERVER_BINARY,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      // No RDB snapshots: the AOF is the durability under test.
      '--save',
      '',
      // BullMQ requires that Redis never evicts its keys.
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const version = await readyOrFail(child, port);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
      await rm(dir, { recursive: true, force: true });
    })());
  return { host: '127.0.0.1', port, dir, version, pid: child.pid ?? -1, stop };
}

/** Resolves with the version once the log says it is ready; rejects if it exits or stalls first. */
function readyOrFail(child: ChildProcess, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let log = '';
    let version = 'unknown';
    const finish = (error?: Error) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      // Keep draining its output so a chatty server never blocks on a full pipe.
      child.stdout?.resume();
      child.stderr?.resume();
      if (error) {
        child.kill('SIGKILL');
        reject(error);
      } else resolve(version);
    };
    const onData = (chunk: Buffer) => {
      log += chunk.toString('utf8');
      version = /version=([\d.]+)/.exec(log)?.[1] ?? version;
      if (log.includes('Ready to accept connections')) finish();
    };
    const onExit = (code: number | null) =>
      finish(
        new Error(`redis-server on port ${port} exited (${code}) before it was ready:\n${log}`),
      );
    const onError = (error: Error) => finish(error);
    const timer = setTimeout(
      () => finish(new Error(`redis-server on port ${port} not ready in ${START_TIMEOUT_MS} ms`)),
      START_TIMEOUT_MS,
    );
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

/** A TCP port nothing listens on right now (the kernel's pick). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

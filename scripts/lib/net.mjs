/** Small network probes: free ports, TCP reachability, the NATS INFO line, polling with a deadline. */
import net from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/** A TCP port that was free on 127.0.0.1 a moment ago (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Opens a TCP connection and resolves with the first chunk the server sends (NATS greets at once;
 * Postgres waits for the client, so the chunk is empty there).
 * @param {{ host: string, port: number, timeoutMs?: number, expectGreeting?: boolean }} target
 * @returns {Promise<string>}
 */
export function probeTcp({ host, port, timeoutMs = 2000, expectGreeting = false }) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let received = '';
    const finish = (error) => {
      socket.destroy();
      if (error) reject(error);
      else resolve(received);
    };
    socket.setTimeout(timeoutMs, () => finish(new Error(`no answer within ${timeoutMs} ms`)));
    socket.on('error', finish);
    socket.on('connect', () => {
      if (!expectGreeting) finish();
    });
    socket.on('data', (chunk) => {
      received += chunk;
      if (received.includes('\n')) finish();
    });
    socket.on('end', () => finish(new Error('connection closed before the greeting')));
  });
}

/** Whether a TCP connection to host:port succeeds. */
export async function canConnect(host, port, timeoutMs = 1000) {
  try {
    await probeTcp({ host, port, timeoutMs });
    return true;
  } catch {
    return false;
  }
}

/**
 * Reads the INFO line a NATS server sends to every new connection.
 * @returns {Promise<Record<string, unknown>>} the parsed INFO object
 */
export async function readNatsInfo(host, port, timeoutMs = 2000) {
  const greeting = await probeTcp({ host, port, timeoutMs, expectGreeting: true });
  const match = /^INFO\s+(\{.*\})\s*$/m.exec(greeting);
  if (!match) throw new Error(`not a NATS server (it greeted with "${greeting.slice(0, 40)}")`);
  return JSON.parse(match[1]);
}

/**
 * Calls `check` until it returns a value other than undefined/false, or the deadline passes. Errors
 * thrown by `check` count as "not yet", except those marked `fatal: true`, which end the wait.
 * @template T
 * @param {() => Promise<T | undefined | false>} check
 * @param {{ what: string, timeoutMs?: number, intervalMs?: number }} options
 * @returns {Promise<T>}
 */
export async function waitFor(check, { what, timeoutMs = 15000, intervalMs = 100 }) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  for (;;) {
    try {
      const result = await check();
      if (result !== undefined && result !== false) return result;
    } catch (error) {
      if (error?.fatal === true) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const detail = lastError ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await delay(intervalMs);
  }
}

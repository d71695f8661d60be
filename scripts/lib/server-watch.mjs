/**
 * Watching the NATS and Postgres servers a test run depends on while the tests run.
 *
 * Why: every NATS client in the suite waits for its server forever (services reconnect without
 * limit, by design), so a shared server that dies mid-run left each remaining test waiting until
 * CI's 90 minutes ran out, with no word on why. Twice the machine's nats-server died that way. A
 * run that lost a server is stopped with the reason instead (and `npm test` says what became of
 * the server's process, and runs the tests again on a private nats-server when NATS was lost).
 */
import { probeTcp, readNatsInfo } from './net.mjs';

/**
 * @typedef {object} WatchedServer
 * @property {string} name e.g. `NATS at 127.0.0.1:4222`
 * @property {'nats' | 'postgres'} [kind]
 * @property {number} [port] its TCP port, when it is on this machine's loopback
 * @property {() => Promise<unknown>} probe resolves when the server answers, rejects otherwise
 */

/**
 * Probes each server every `intervalMs`; when one has not answered for `graceMs` (a restart or a
 * busy moment is allowed for), calls `onLost` once with the reason and stops watching.
 * @param {readonly WatchedServer[]} servers
 * @param {{ onLost: (reason: string) => void, intervalMs?: number, graceMs?: number }} options
 * @returns {{ stop(): void }}
 */
export function watchServers(servers, { onLost, intervalMs = 5_000, graceMs = 30_000 }) {
  const lastAnswer = new Map(servers.map((server) => [server, Date.now()]));
  let stopped = false;
  let probing = false;
  const timer = setInterval(async () => {
    if (probing || stopped) return;
    probing = true;
    try {
      for (const server of servers) {
        let problem;
        try {
          await server.probe();
          lastAnswer.set(server, Date.now());
        } catch (error) {
          problem = error?.message ?? String(error);
        }
        const silentMs = Date.now() - lastAnswer.get(server);
        if (problem !== undefined && silentMs >= graceMs && !stopped) {
          stopped = true;
          clearInterval(timer);
          onLost(
            `${server.name} has not answered for ${Math.round(silentMs / 1000)} s (${problem})`,
            server,
          );
          return;
        }
      }
    } finally {
      probing = false;
    }
  }, intervalMs);
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/**
 * The servers behind `NATS_URL` (its first server) and `DATABASE_URL`, as far as they can be
 * probed over TCP (a WebSocket NATS URL or a Postgres Unix socket is left out).
 * @param {{ natsUrl?: string, databaseUrl?: string }} urls
 * @returns {WatchedServer[]}
 */
export function serversOf({ natsUrl, databaseUrl }) {
  const servers = [];
  const nats = tcpTarget(natsUrl?.split(',')[0]?.trim(), 'nats:', 4222);
  if (nats && nats.protocol !== 'ws:' && nats.protocol !== 'wss:') {
    servers.push({
      name: `NATS at ${nats.host}:${nats.port}`,
      kind: 'nats',
      ...localPort(nats),
      probe: () => readNatsInfo(nats.host, nats.port, 3_000),
    });
  }
  const postgres = tcpTarget(databaseUrl, 'postgres:', 5432);
  if (postgres) {
    servers.push({
      name: `Postgres at ${postgres.host}:${postgres.port}`,
      kind: 'postgres',
      ...localPort(postgres),
      probe: () => probeTcp({ host: postgres.host, port: postgres.port, timeoutMs: 3_000 }),
    });
  }
  return servers;
}

/** `{ port }` of a server on this machine's loopback (whose process /proc can show), else `{}`. */
function localPort({ host, port }) {
  return host === '127.0.0.1' || host === 'localhost' || host === '::1' ? { port } : {};
}

/** Host, port and protocol of a URL with a TCP host; undefined without one (or unparsable). */
function tcpTarget(raw, defaultProtocol, defaultPort) {
  if (!raw) return undefined;
  let url;
  try {
    url = new URL(raw.includes('://') ? raw : `${defaultProtocol}//${raw}`);
  } catch {
    return undefined;
  }
  if (!url.hostname) return undefined;
  return {
    protocol: url.protocol,
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : defaultPort,
  };
}

/** Types of server-watch.mjs, for the TypeScript tests that use it. */

/** A server the watch probes. */
export interface WatchedServer {
  /** E.g. `NATS at 127.0.0.1:4222`. */
  readonly name: string;
  readonly kind?: 'nats' | 'postgres';
  /** Its TCP port, when it is on this machine's loopback. */
  readonly port?: number;
  /** Resolves when the server answers, rejects otherwise. */
  probe(): Promise<unknown>;
}

export function watchServers(
  servers: readonly WatchedServer[],
  options: {
    onLost: (reason: string, server: WatchedServer) => void;
    intervalMs?: number;
    graceMs?: number;
  },
): { stop(): void };

export function serversOf(urls: { natsUrl?: string; databaseUrl?: string }): WatchedServer[];

/**
 * A TCP proxy in front of a Postgres server that counts the round trips a client waits for, so a
 * test can check that statements meant to go out together do (see postgres-driver.test.ts).
 */
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server } from 'node:net';

/**
 * The proxy. It counts the client's turns: the times it sent something after the server had
 * answered (or first). A turn is a round trip the client waited for.
 */
export interface TurnCounter {
  /** The database URL through the proxy. */
  readonly url: string;
  /** Turns since the last {@link reset}. */
  turns(): number;
  reset(): void;
  close(): Promise<void>;
}

/** Starts a proxy on a free local port to the server of `databaseUrl`. */
export async function startTurnCounter(databaseUrl: string): Promise<TurnCounter> {
  const target = new URL(databaseUrl);
  let turns = 0;
  let lastFromClient = false;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    client.on('data', (chunk) => {
      if (!lastFromClient) turns += 1;
      lastFromClient = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      lastFromClient = false;
      client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: url.toString(),
    turns: () => turns,
    reset: () => {
      turns = 0;
      lastFromClient = false;
    },
    close: async () => {
      server.close();
      await once(server, 'close');
    },
  };
}

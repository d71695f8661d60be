/**
 * A TCP proxy in front of a Postgres server that counts the round trips a client waits for, so a
 * test can check that statements meant to go out together do (see postgres-driver.test.ts).
 */
import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Server } from 'node:net';

/**
 * The proxy. It counts the client's turns two ways:
 *
 * - {@link TurnCounter.turns}: the times the client sent something after the server had answered
 *   (or first), on any connection. A turn is a round trip the client waited for — as long as it
 *   talks on one connection at a time.
 * - {@link TurnCounter.connectionTurns}: the same, on each connection, summed. Statements the
 *   client starts at once on two connections are two turns here, always; counted the first way
 *   they were one or two, depending on whether the server answered the first before the second
 *   went out (a race a busy machine loses now and then).
 */
export interface TurnCounter {
  /** The database URL through the proxy. */
  readonly url: string;
  /** Turns since the last {@link reset}, on all connections together. */
  turns(): number;
  /** Turns since the last {@link reset}, counted on each connection, in order. */
  connectionTurns(): readonly ConnectionTurn[];
  reset(): void;
  close(): Promise<void>;
}

/** A turn on one connection: what the client sent first in it. */
export interface ConnectionTurn {
  /** The proxied connection, numbered from 1 in the order the client opened them. */
  readonly connection: number;
  /**
   * The frontend message types of the chunk, as far as it holds whole headers: `P` parse (a
   * statement prepared on this connection for the first time), `B` bind, `E` execute, `S` sync …
   */
  readonly messages: string;
  readonly bytes: number;
}

/** Whether the turn prepared a statement: sent a parse, which a statement prepared before skips. */
export function preparesStatement(turn: ConnectionTurn): boolean {
  return turn.messages.includes('P');
}

/** A turn for a failure message: `#3 BESBES (410 bytes)`. */
export function describeTurn(turn: ConnectionTurn): string {
  return `#${turn.connection} ${turn.messages} (${turn.bytes} bytes)`;
}

/** Starts a proxy on a free local port to the server of `databaseUrl`. */
export async function startTurnCounter(databaseUrl: string): Promise<TurnCounter> {
  const target = new URL(databaseUrl);
  let turns = 0;
  let lastFromClient = false;
  let connectionTurns: ConnectionTurn[] = [];
  /** Per connection: whether the client spoke last there (since the last reset). */
  const clientSpokeLast = new Map<number, boolean>();
  let connections = 0;
  const server: Server = createServer((client) => {
    const connection = ++connections;
    const upstream = connect(Number(target.port || 5432), target.hostname);
    client.on('data', (chunk: Buffer) => {
      if (!lastFromClient) turns += 1;
      lastFromClient = true;
      if (!clientSpokeLast.get(connection)) {
        connectionTurns.push({ connection, messages: messageTypesOf(chunk), bytes: chunk.length });
      }
      clientSpokeLast.set(connection, true);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      lastFromClient = false;
      clientSpokeLast.set(connection, false);
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
    connectionTurns: () => [...connectionTurns],
    reset: () => {
      turns = 0;
      lastFromClient = false;
      connectionTurns = [];
      clientSpokeLast.clear();
    },
    close: async () => {
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * The message types in a chunk of the frontend protocol (a type byte and a 4-byte length each),
 * as far as the chunk holds whole headers. (The startup message has no type byte and reads as
 * nonsense; no test counts a connection's opening.)
 */
function messageTypesOf(chunk: Buffer): string {
  let types = '';
  for (let at = 0; at + 5 <= chunk.length; at += 1 + chunk.readUInt32BE(at + 1)) {
    types += String.fromCharCode(chunk[at]!);
  }
  return types;
}

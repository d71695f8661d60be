/**
 * A loopback HTTP server whose requests wait until the test releases them: steps of test task
 * types call `GET /latch/<key>` and block there, so a test can act (cancel, pause, kill an
 * executor …) while a step is known to be running, then let it finish. Node built-ins only.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One arrival at a latch. */
export interface LatchArrival {
  readonly key: string;
  /** The request's `idempotency-key` header (steps pass theirs). */
  readonly idempotencyKey: string | undefined;
  /** Whether the caller went away before a release (its step was aborted or its process died). */
  aborted: boolean;
}

/** A running latch server. */
export interface LatchServer {
  /** e.g. `http://127.0.0.1:PORT`; steps call `${baseUrl}/latch/<key>`. */
  readonly baseUrl: string;
  /** Every arrival, in order. */
  readonly arrivals: LatchArrival[];
  /** Waits until `count` requests arrived at `key` (default 1); returns them. */
  arrived(key: string, count?: number, timeoutMs?: number): Promise<LatchArrival[]>;
  /** Answers the waiting requests of `key` (and future ones) with 200 and `body` as JSON. */
  release(key: string, body?: unknown): void;
  /** Answers the waiting requests of `key` (and future ones) with `status` (e.g. a 500). */
  fail(key: string, status?: number): void;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const LATCH_PATH = /^\/latch\/([A-Za-z0-9:_.-]{1,200})$/;

export async function startLatchServer(): Promise<LatchServer> {
  const arrivals: LatchArrival[] = [];
  const waiting = new Map<string, ServerResponse[]>();
  const released = new Map<string, { status: number; body: string }>();
  const watchers = new Set<() => void>();
  const notify = () => {
    for (const watcher of [...watchers]) watcher();
  };

  const server = createServer((request, response) => {
    const key = LATCH_PATH.exec(request.url ?? '')?.[1];
    if (request.method !== 'GET' || key === undefined) {
      response.writeHead(404).end();
      return;
    }
    const header = request.headers['idempotency-key'];
    const arrival: LatchArrival = {
      key,
      idempotencyKey: typeof header === 'string' ? header : undefined,
      aborted: false,
    };
    arrivals.push(arrival);
    const answer = released.get(key);
    if (answer !== undefined) {
      response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    } else {
      const list = waiting.get(key) ?? [];
      list.push(response);
      waiting.set(key, list);
      response.on('close', () => {
        if (!response.writableEnded) arrival.aborted = true;
        notify();
      });
    }
    notify();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const answer = (key: string, status: number, body: string) => {
    released.set(key, { status, body });
    for (const response of waiting.get(key) ?? []) {
      if (!response.destroyed) {
        response.writeHead(status, { 'content-type': 'application/json' }).end(body);
      }
    }
    waiting.delete(key);
  };

  const stop = async () => {
    for (const list of waiting.values()) for (const response of list) response.destroy();
    waiting.clear();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    arrivals,
    async arrived(key, count = 1, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = arrivals.filter((a) => a.key === key);
        if (found.length >= count) return found;
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(`fewer than ${count} arrivals at latch ${key} in ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            watchers.delete(done);
            resolve();
          };
          const timer = setTimeout(done, left);
          watchers.add(done);
        });
      }
    },
    release(key, body = { released: key }) {
      answer(key, 200, JSON.stringify(body));
    },
    fail(key, status = 500) {
      answer(key, status, JSON.stringify({ failed: key }));
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

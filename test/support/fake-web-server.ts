/**
 * A fake web site on loopback, for tests and the demo: the outside world that `tool:http` steps
 * fetch. Serves fixed pages over real HTTP and counts the hits on each path, so a test can check
 * that a step fetched what it should, and how often (retries, idempotent replays).
 *
 * Node built-ins only, so the demo script can import it too.
 *
 * @example
 * ```ts
 * await using web = await startFakeWebServer({ pages: { '/doc': '<h1>Doc</h1>' } });
 * await fetch(web.url('/doc'));
 * web.hits.get('/doc'); // 1
 * ```
 */
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';

/** The pages served when none are given: an index and two short articles. */
export const DEFAULT_PAGES: Readonly<Record<string, string>> = {
  '/': [
    '<!doctype html>',
    '<html><head><title>Sluice test site</title></head><body>',
    '<h1>Sluice test site</h1>',
    '<ul><li><a href="/articles/backpressure">Backpressure</a></li>',
    '<li><a href="/articles/priorities">Priorities</a></li></ul>',
    '</body></html>',
  ].join('\n'),
  '/articles/backpressure': [
    '<!doctype html>',
    '<html><head><title>Backpressure</title></head><body>',
    '<h1>Backpressure</h1>',
    '<p>When a downstream dependency slows down, admit less work instead of queueing it in memory.',
    'Shed the least urgent work first and tell callers when to try again.</p>',
    '</body></html>',
  ].join('\n'),
  '/articles/priorities': [
    '<!doctype html>',
    '<html><head><title>Priorities</title></head><body>',
    '<h1>Priorities</h1>',
    '<p>Urgent tasks go first, but every priority keeps a share of capacity so none starves.</p>',
    '</body></html>',
  ].join('\n'),
  '/notes.txt':
    'Plain text notes: queues absorb bursts; admission control protects what is behind them.\n',
};

/** Options of {@link startFakeWebServer}. */
export interface FakeWebServerOptions {
  /** Body by path (starting with `/`); replaces {@link DEFAULT_PAGES}. A body starting with `<` is served as HTML, any other as plain text. */
  pages?: Readonly<Record<string, string>>;
  /** The loopback port; default 0 (a free one). */
  port?: number;
}

/** A running fake web site. */
export interface FakeWebServer {
  /** The origin, e.g. `http://127.0.0.1:41234` (no trailing slash). */
  readonly baseUrl: string;
  /** Requests per path (query strings ignored), counting every method and 404s too. */
  readonly hits: Map<string, number>;
  /** The absolute URL of `path` on this server. */
  url(path: string): string;
  /** Stops the server and closes open connections. Idempotent. */
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts the fake site on `127.0.0.1`: `GET`/`HEAD` of a known path answer 200 with its page,
 * other methods 405, unknown paths 404.
 *
 * @throws RangeError when a page path does not start with `/`.
 */
export async function startFakeWebServer(
  options: FakeWebServerOptions = {},
): Promise<FakeWebServer> {
  const pages = new Map(Object.entries(options.pages ?? DEFAULT_PAGES));
  for (const path of pages.keys()) {
    if (!path.startsWith('/')) throw new RangeError(`page path "${path}" must start with /`);
  }
  const hits = new Map<string, number>();

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    req.resume();

    const page = pages.get(path);
    if (page === undefined) return send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return send(res, 405, 'text/plain; charset=utf-8', 'method not allowed\n');
    }
    const type = page.trimStart().startsWith('<') ? 'text/html' : 'text/plain';
    send(res, 200, `${type}; charset=utf-8`, page);
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') {
    throw new Error(`fake web server is not on a TCP port: ${String(address)}`);
  }
  const baseUrl = `http://127.0.0.1:${address.port}`;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= new Promise<void>((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
      server.closeAllConnections();
    });
    return stopping;
  };

  return {
    baseUrl,
    hits,
    url: (path) => new URL(path, baseUrl).href,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The small HTTP endpoint each service opens for Prometheus and for liveness/readiness probes.
 * Plain `node:http`: two read-only routes do not justify a framework.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';

/** The interface the metrics server listens on unless told otherwise: loopback only. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** The interface to listen on; default {@link DEFAULT_METRICS_HOST}. `0.0.0.0` in a container. */
  host?: string;
  /** The TCP port; 0 picks a free one (read it back from {@link MetricsServer.port}). */
  port: number;
  /** The registry served on `/metrics`, usually `createMetrics().registry`. */
  registry: Registry;
  /** Whether the service is ready, for `/healthz`; default always ready once listening. */
  isReady?: () => boolean;
}

/** A running metrics server. */
export interface MetricsServer {
  /** The port it listens on (the chosen one when 0 was asked for). */
  readonly port: number;
  /** Stops listening and closes open connections (scrapers keep theirs alive). Idempotent. */
  stop(): Promise<void>;
  /** {@link MetricsServer.stop}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Starts an HTTP server answering
 * - `GET /metrics`: the registry in the Prometheus text format;
 * - `GET /healthz`: 200 `ok` when `isReady()` says so, 503 `not ready` otherwise;
 * - 405 for other methods on those paths, 404 for any other path.
 *
 * @returns once the server listens.
 * @throws the listen error, e.g. `EADDRINUSE`.
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const { registry, isReady = () => true } = options;

  const server = createServer((req, res) => {
    route(req, res, registry, isReady).catch((error: unknown) => {
      // Reached when a collect callback of the registry, or isReady, throws.
      if (!res.headersSent) {
        sendText(
          res,
          500,
          `internal error: ${error instanceof Error ? error.message : String(error)}`,
        );
      } else {
        res.destroy();
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? DEFAULT_METRICS_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const address = server.address();
  if (address === null || typeof address === 'string') {
    server.close();
    throw new Error(`metrics server is not listening on a TCP port: ${String(address)}`);
  }

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= new Promise<void>((resolve, reject) => {
      server.close((error) => (error ? reject(error) : resolve()));
      server.closeAllConnections();
    });
    return stopping;
  };

  return {
    port: address.port,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  registry: Registry,
  isReady: () => boolean,
): Promise<void> {
  // Only the path matters; a base is needed to parse the relative request target.
  const path = new URL(req.url ?? '/', 'http://localhost').pathname;
  if (path !== '/metrics' && path !== '/healthz') return sendText(res, 404, 'not found');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    return sendText(res, 405, 'method not allowed');
  }
  if (path === '/healthz') {
    return isReady() ? sendText(res, 200, 'ok') : sendText(res, 503, 'not ready');
  }
  const body = await registry.metrics();
  res.writeHead(200, { 'content-type': registry.contentType });
  res.end(body);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(`${text}\n`);
}

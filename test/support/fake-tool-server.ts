/**
 * A fake external tool on loopback for the backpressure tests: it counts every call, the calls in
 * flight at once (overall and per tenant, from the `tenant` query parameter) and the most there
 * ever were, can hold each call for a while (`latencyMs`) and can be switched to fail (500) and
 * back. Node built-ins only.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

export interface FakeToolServer {
  /** e.g. `http://127.0.0.1:PORT`; steps call `${baseUrl}/call?tenant=<id>`. */
  readonly baseUrl: string;
  /** Calls received (answered or still running). */
  readonly calls: number;
  /** Calls answered 500 because the tool was failing. */
  readonly failures: number;
  /** Calls answered 200. */
  readonly successes: number;
  readonly inFlight: number;
  /** The most calls in flight at once since the start (or the last {@link resetPeaks}). */
  readonly maxInFlight: number;
  /** The same per tenant. */
  maxInFlightOf(tenant: string): number;
  /** Completed successful calls per tenant. */
  successesOf(tenant: string): number;
  /** Makes every call from now on answer 500 (`true`) or succeed (`false`). */
  setFailing(failing: boolean): void;
  /** Sets how long each call is held before it is answered. */
  setLatency(ms: number): void;
  resetPeaks(): void;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startFakeToolServer(
  options: { latencyMs?: number } = {},
): Promise<FakeToolServer> {
  let latencyMs = options.latencyMs ?? 0;
  let failing = false;
  let calls = 0;
  let failures = 0;
  let successes = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const inFlightByTenant = new Map<string, number>();
  const maxByTenant = new Map<string, number>();
  const successesByTenant = new Map<string, number>();

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname !== '/call') {
      response.writeHead(404).end();
      return;
    }
    const tenant = url.searchParams.get('tenant') ?? '';
    calls += 1;
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const mine = (inFlightByTenant.get(tenant) ?? 0) + 1;
    inFlightByTenant.set(tenant, mine);
    maxByTenant.set(tenant, Math.max(maxByTenant.get(tenant) ?? 0, mine));
    const failNow = failing;
    void delay(latencyMs).then(() => {
      inFlight -= 1;
      inFlightByTenant.set(tenant, (inFlightByTenant.get(tenant) ?? 1) - 1);
      if (failNow) {
        failures += 1;
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: 'the tool is failing' }));
        return;
      }
      successes += 1;
      successesByTenant.set(tenant, (successesByTenant.get(tenant) ?? 0) + 1);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get calls() {
      return calls;
    },
    get failures() {
      return failures;
    },
    get successes() {
      return successes;
    },
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    maxInFlightOf: (tenant) => maxByTenant.get(tenant) ?? 0,
    successesOf: (tenant) => successesByTenant.get(tenant) ?? 0,
    setFailing(value) {
      failing = value;
    },
    setLatency(ms) {
      latencyMs = ms;
    },
    resetPeaks() {
      maxInFlight = inFlight;
      maxByTenant.clear();
      for (const [tenant, count] of inFlightByTenant) maxByTenant.set(tenant, count);
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

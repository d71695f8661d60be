import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import { Gauge } from 'prom-client';
import { createMetrics } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';

describe('startMetricsServer', () => {
  it('serves the registry on /metrics in the Prometheus text format', async () => {
    const metrics = createMetrics();
    metrics.stepsDispatched.inc({ resource: 'tool:http', priority: 'P0' }, 2);
    await using server = await startMetricsServer({ port: 0, registry: metrics.registry });
    assert.ok(server.port > 0);

    const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get('content-type'), metrics.registry.contentType);
    assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const body = await response.text();
    assert.match(body, /^sluice_steps_dispatched_total\{resource="tool:http",priority="P0"\} 2$/m);
    assert.match(body, /^# HELP sluice_steps_dispatched_total /m);

    // A query string does not change the route.
    const withQuery = await fetch(`http://127.0.0.1:${server.port}/metrics?name[]=x`);
    assert.equal(withQuery.status, 200);
    await withQuery.body?.cancel();
  });

  it('answers /healthz from isReady', async () => {
    let ready = false;
    await using server = await startMetricsServer({
      port: 0,
      registry: createMetrics().registry,
      isReady: () => ready,
    });
    const url = `http://127.0.0.1:${server.port}/healthz`;

    const notReady = await fetch(url);
    assert.equal(notReady.status, 503);
    assert.equal(await notReady.text(), 'not ready\n');

    ready = true;
    const isReady = await fetch(url);
    assert.equal(isReady.status, 200);
    assert.equal(await isReady.text(), 'ok\n');
  });

  it('is ready by default, 404s unknown paths and 405s other methods', async () => {
    await using server = await startMetricsServer({ port: 0, registry: createMetrics().registry });
    const base = `http://127.0.0.1:${server.port}`;

    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const missing = await fetch(`${base}/nothing-here`);
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    const post = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
    await post.body?.cancel();
  });

  it('answers 500 when the registry cannot render', async () => {
    const metrics = createMetrics();
    metrics.registry.registerMetric(
      // A collect callback that throws, as a buggy custom metric would.
      new Gauge({
        name: 'broken_gauge',
        help: 'throws on collect',
        registers: [],
        collect() {
          throw new Error('collector exploded');
        },
      }),
    );
    await using server = await startMetricsServer({ port: 0, registry: metrics.registry });
    const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    assert.equal(response.status, 500);
    assert.match(await response.text(), /collector exploded/);
  });

  it('stops within a bound even while a scrape is in flight', async () => {
    const metrics = createMetrics();
    let collecting: () => void = () => undefined;
    const collectStarted = new Promise<void>((resolve) => (collecting = resolve));
    metrics.registry.registerMetric(
      new Gauge({
        name: 'stuck_gauge',
        help: 'never finishes collecting',
        registers: [],
        collect() {
          collecting();
          return new Promise<void>(() => undefined);
        },
      }),
    );
    const server = await startMetricsServer({ port: 0, registry: metrics.registry });
    const { port } = server;

    const scrape = new Promise<void>((resolve) => {
      request({ host: '127.0.0.1', port, path: '/metrics' })
        .on('response', (res) => res.resume())
        .on('error', () => resolve())
        .end();
    });
    await collectStarted;

    // server.close() alone waits for the stuck request; stop() must cut it off.
    let deadline: NodeJS.Timeout | undefined;
    await Promise.race([
      server.stop(),
      new Promise((_, reject) => {
        deadline = setTimeout(() => reject(new Error('stop() took over 1 s')), 1000);
      }),
    ]).finally(() => clearTimeout(deadline));
    await scrape;
    await server.stop();
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`));
  });

  it('reports a port already in use', async () => {
    await using first = await startMetricsServer({ port: 0, registry: createMetrics().registry });
    await assert.rejects(
      startMetricsServer({ port: first.port, registry: createMetrics().registry }),
      /EADDRINUSE/,
    );
  });
});

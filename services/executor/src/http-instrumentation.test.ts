import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SpanKind, trace } from '@opentelemetry/api';
import { startTracing, type Tracing } from '@sluice/telemetry';
import { startHttpInstrumentation, type HttpInstrumentation } from './http-instrumentation.js';
import { createSpanRecorder, type SpanRecorder } from './span-recorder.js';

describe('HTTP client spans of what steps call', () => {
  let tracing: Tracing;
  let http: HttpInstrumentation;
  let recorder: SpanRecorder;
  const server = createServer((_req, res) => res.end('ok'));
  let base = '';

  before(async () => {
    recorder = createSpanRecorder();
    tracing = startTracing({ serviceName: 'http-span-test', spanProcessors: [recorder] });
    http = startHttpInstrumentation();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    http.stop();
    await tracing.shutdown();
  });

  it('keep credentials in the query string out of url.full and url.query', async () => {
    // A tool API keyed by a query parameter, as many are (`?api_key=`, `?key=`, `?token=`).
    const url = `${base}/search?q=sluice&api_key=SECRET-1&key=SECRET-2&access_token=SECRET-3&sig=SECRET-4`;
    await trace.getTracer('test').startActiveSpan('sluice.step search', async (span) => {
      try {
        await (await fetch(url)).text();
      } finally {
        span.end();
      }
    });
    const request = await recorder.waitFor(
      (s) => s.kind === SpanKind.CLIENT && s.attributes['url.path'] === '/search',
    );
    const full = String(request.attributes['url.full']);
    const query = String(request.attributes['url.query']);
    for (const text of [full, query]) {
      assert.doesNotMatch(text, /SECRET/, text);
      assert.match(text, /q=sluice/);
      assert.match(text, /api_key=REDACTED/);
    }
    assert.equal(
      full,
      `${base}/search?q=sluice&api_key=REDACTED&key=REDACTED&access_token=REDACTED&sig=REDACTED`,
    );
  });
});

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { MAX_BODY_BYTES, fetchPage, htmlToText } from './web-page.js';

describe('htmlToText', () => {
  it('keeps the title and the readable text', () => {
    const html =
      '<html><head><title> A &amp; B </title><style>p{}</style></head><body><h1>Head</h1>' +
      '<script>var x = 1;</script><p>One&nbsp;two &#x41;&#66; &bogus;</p><ul><li>x</li><li>y</li></ul></body></html>';
    assert.deepEqual(htmlToText(html), { title: 'A & B', text: 'Head\nOne two AB &bogus;\nx\ny' });
    assert.deepEqual(htmlToText('plain'), { title: null, text: 'plain' });
  });
});

describe('fetchPage', () => {
  const server = createServer((req, res) => {
    if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('x'.repeat(MAX_BODY_BYTES + 10));
    } else if (req.url === '/busy') {
      res.writeHead(503, { 'retry-after': '2' }).end();
    } else if (req.url === '/key') {
      res
        .writeHead(200, { 'content-type': 'text/plain' })
        .end(String(req.headers['idempotency-key']));
    } else {
      res.writeHead(404, { 'content-type': 'text/html' }).end('<title>Gone</title>missing');
    }
  });
  let base = '';
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const options = { signal: AbortSignal.timeout(10_000), idempotencyKey: 'task:3' };

  it('sends the idempotency key', async () => {
    assert.equal((await fetchPage(`${base}/key`, options)).text, 'task:3');
  });

  it('cuts a body larger than the limit', async () => {
    const page = await fetchPage(`${base}/big`, options);
    assert.equal(page.truncated, true);
    assert.equal(page.body.length, MAX_BODY_BYTES);
  });

  it('throws HTTP errors unless accepted; never accepts 429 or 5xx', async () => {
    await assert.rejects(fetchPage(`${base}/nothing`, options), {
      name: 'HttpStatusError',
      status: 404,
    });
    const gone = await fetchPage(`${base}/nothing`, { ...options, acceptStatus: () => true });
    assert.deepEqual([gone.status, gone.title, gone.text], [404, 'Gone', 'missing']);
    await assert.rejects(fetchPage(`${base}/busy`, { ...options, acceptStatus: () => true }), {
      name: 'HttpStatusError',
      status: 503,
      retryAfterMs: 2_000,
    });
  });

  it("names the URL in its error without the query string's credentials", async () => {
    const url = `${base}/nothing?q=sluice&api_key=SECRET-1`;
    await assert.rejects(fetchPage(url, options), {
      status: 404,
      message: `${base}/nothing?q=sluice&api_key=REDACTED answered HTTP 404`,
    });
  });
});

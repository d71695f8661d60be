import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { researchBrief } from './research-brief.js';
import { MAX_BODY_BYTES } from './web-page.js';

it('research-brief fetchSource closes the answer of a failed fetch', async () => {
  let closed = false;
  const server = createServer((_req, res) => {
    res.writeHead(503, { 'content-type': 'text/plain' });
    res.write('x'.repeat(64 * 1024));
    // An answer that goes on: only the client's cancel (or its garbage collector) ends it.
    const more = setInterval(() => res.write('x'.repeat(1024)), 10);
    res.on('close', () => {
      clearInterval(more);
      closed = true;
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const step = researchBrief.steps.fetchSource;
    assert.ok(step);
    const ctx = {
      taskInput: { topic: 't', sourceUrl: url },
      input: { url, outline: 'o' },
      signal: new AbortController().signal,
      idempotencyKey: 'task:2',
    } as unknown as Parameters<typeof step.run>[0];
    await assert.rejects(Promise.resolve(step.run(ctx)), { name: 'HttpStatusError', status: 503 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(closed, true, 'the connection of the failed fetch is still open');
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

it('research-brief fetchSource reads at most MAX_BODY_BYTES of an endless page', async () => {
  let sent = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.write('<title>Endless</title>');
    // A page that never ends: reading it whole would hold the step until its timeout (or exhaust
    // the executor's memory first).
    const more = setInterval(() => {
      res.write('x'.repeat(256 * 1024));
      sent += 256 * 1024;
    }, 1);
    res.on('close', () => clearInterval(more));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const step = researchBrief.steps.fetchSource;
    assert.ok(step);
    const ctx = {
      taskInput: { topic: 't', sourceUrl: url },
      input: { url, outline: 'o' },
      signal: AbortSignal.timeout(5_000),
      idempotencyKey: 'task:3',
    } as unknown as Parameters<typeof step.run>[0];
    const result = (await step.run(ctx)) as unknown as {
      output: { source: { title: string | null; chars: number } };
    };
    assert.equal(result.output.source.title, 'Endless');
    assert.ok(result.output.source.chars <= MAX_BODY_BYTES);
    assert.ok(sent < 64 * MAX_BODY_BYTES, `${sent} bytes were sent before the page was cut`);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { it } from 'node:test';
import { researchBrief } from './research-brief.js';

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

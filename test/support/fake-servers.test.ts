import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeCompletionContent, startFakeLlmServer } from './fake-llm-server.js';
import { DEFAULT_PAGES, startFakeWebServer } from './fake-web-server.js';

const KEY = 'sk-fake-test-key';

function chat(
  baseUrl: string,
  body: unknown,
  headers: Record<string, string> = { authorization: `Bearer ${KEY}` },
): Promise<Response> {
  return fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const REQUEST = {
  model: 'gpt-test',
  messages: [
    { role: 'system', content: 'You summarize web pages.' },
    {
      role: 'user',
      content:
        'Backpressure keeps queues short by admitting less work when a dependency slows down.',
    },
  ],
};

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

describe('fake LLM server', () => {
  it('answers a well-formed, deterministic chat completion', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });
    assert.match(llm.baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);

    const response = await chat(llm.baseUrl, REQUEST);
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
    const body = (await response.json()) as Record<string, unknown>;
    assert.match(String(body.id), /^chatcmpl-/);
    assert.equal(body.object, 'chat.completion');
    assert.equal(typeof body.created, 'number');
    assert.equal(body.model, 'gpt-test');
    const expected = 'Summary: Backpressure keeps queues short by admitting less work';
    assert.deepEqual(body.choices, [
      {
        index: 0,
        message: { role: 'assistant', content: expected, refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ]);
    assert.equal(fakeCompletionContent(llm.requests[0]?.messages ?? []), expected);
    const usage = body.usage as Record<string, number>;
    assert.equal(usage.prompt_tokens, 17); // 4 + 13 words
    assert.equal(usage.completion_tokens, 9);
    assert.equal(usage.total_tokens, 26);

    assert.equal(llm.requests.length, 1);
    assert.equal(llm.requests[0]?.model, 'gpt-test');
    assert.deepEqual(llm.requests[0]?.messages, REQUEST.messages);
    assert.equal(llm.requests[0]?.headers.authorization, `Bearer ${KEY}`);
  });

  it('summarizes the last user message, including content parts', () => {
    assert.equal(
      fakeCompletionContent([
        { role: 'user', content: 'first question' },
        { role: 'assistant', content: 'an answer' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'second' },
            { type: 'image_url' },
            { type: 'text', text: 'question\tnow' },
          ],
        },
      ]),
      'Summary: second question now',
    );
    assert.equal(
      fakeCompletionContent([{ role: 'system', content: 'only a system prompt' }]),
      'Summary: (nothing to summarize)',
    );
  });

  it('rejects a missing or wrong API key with an OpenAI-style 401', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });

    const missing = await chat(llm.baseUrl, REQUEST, {});
    assert.equal(missing.status, 401);
    const missingBody = (await missing.json()) as ErrorBody;
    assert.equal(missingBody.error.type, 'invalid_request_error');

    const wrong = await chat(llm.baseUrl, REQUEST, { authorization: 'Bearer sk-other' });
    assert.equal(wrong.status, 401);
    assert.equal(((await wrong.json()) as ErrorBody).error.code, 'invalid_api_key');
    assert.equal(llm.requests.length, 0);
  });

  it('accepts any caller when no API key is configured', async () => {
    await using llm = await startFakeLlmServer();
    const response = await chat(llm.baseUrl, REQUEST, {});
    assert.equal(response.status, 200);
    await response.body?.cancel();
  });

  const badBodies: Array<[string, unknown, string | null]> = [
    ['malformed JSON', '{"model": ', null],
    ['an array body', '[]', null],
    ['no model', { messages: REQUEST.messages }, 'model'],
    ['an empty model', { model: '', messages: REQUEST.messages }, 'model'],
    ['no messages', { model: 'm' }, 'messages'],
    ['empty messages', { model: 'm', messages: [] }, 'messages'],
    ['a message that is a string', { model: 'm', messages: ['hi'] }, 'messages[0]'],
    [
      'an unknown role',
      { model: 'm', messages: [{ role: 'bot', content: 'x' }] },
      'messages[0].role',
    ],
    [
      'numeric content',
      { model: 'm', messages: [{ role: 'user', content: 3 }] },
      'messages[0].content',
    ],
    [
      'a text part without text',
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'text' }] }] },
      'messages[0].content',
    ],
    ['streaming', { ...REQUEST, stream: true }, 'stream'],
  ];
  for (const [name, body, param] of badBodies) {
    it(`answers 400 for ${name}`, async () => {
      await using llm = await startFakeLlmServer({ apiKey: KEY });
      const response = await chat(llm.baseUrl, body);
      assert.equal(response.status, 400);
      const error = ((await response.json()) as ErrorBody).error;
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, param);
      assert.equal(llm.requests.length, 0);
    });
  }

  it('answers injected failures in order, then completions', async () => {
    await using llm = await startFakeLlmServer({
      apiKey: KEY,
      failures: [{ status: 429, retryAfterSeconds: 2 }, { status: 500 }],
    });

    const limited = await chat(llm.baseUrl, REQUEST);
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('retry-after'), '2');
    assert.equal(((await limited.json()) as ErrorBody).error.code, 'rate_limit_exceeded');

    const broken = await chat(llm.baseUrl, REQUEST);
    assert.equal(broken.status, 500);
    assert.equal(broken.headers.get('retry-after'), null);
    assert.equal(((await broken.json()) as ErrorBody).error.type, 'server_error');

    const ok = await chat(llm.baseUrl, REQUEST);
    assert.equal(ok.status, 200);
    await ok.body?.cancel();

    llm.failNext({ status: 503, retryAfterSeconds: 0 });
    const overloaded = await chat(llm.baseUrl, REQUEST);
    assert.equal(overloaded.status, 503);
    assert.equal(overloaded.headers.get('retry-after'), '0');
    await overloaded.body?.cancel();

    assert.equal(llm.requests.length, 4);
  });

  it('refuses nonsense failures and latencies', async () => {
    await assert.rejects(startFakeLlmServer({ failures: [{ status: 200 }] }), RangeError);
    await assert.rejects(
      startFakeLlmServer({ failures: [{ status: 429, retryAfterSeconds: 1.5 }] }),
      RangeError,
    );
    await assert.rejects(startFakeLlmServer({ latencyMs: -1 }), RangeError);
  });

  it('delays answers by latencyMs', async () => {
    await using llm = await startFakeLlmServer({ latencyMs: 150 });
    const started = performance.now();
    const response = await chat(llm.baseUrl, REQUEST);
    assert.equal(response.status, 200);
    await response.body?.cancel();
    assert.ok(performance.now() - started >= 140, 'answered before the configured latency');
  });

  it('answers 404 and 405 off the route', async () => {
    await using llm = await startFakeLlmServer();
    const missing = await fetch(`${llm.baseUrl}/embeddings`, { method: 'POST', body: '{}' });
    assert.equal(missing.status, 404);
    assert.match(((await missing.json()) as ErrorBody).error.message, /Invalid URL/);
    const wrongMethod = await fetch(`${llm.baseUrl}/chat/completions`);
    assert.equal(wrongMethod.status, 405);
    await wrongMethod.body?.cancel();
  });

  it('stops promptly even with an answer pending, and refuses connections afterwards', async () => {
    const llm = await startFakeLlmServer({ latencyMs: 60_000 });
    const pending = chat(llm.baseUrl, REQUEST);
    pending.catch(() => undefined); // asserted below; keep it from counting as unhandled meanwhile
    // The call is recorded on arrival, then held by the latency.
    const deadline = Date.now() + 5000;
    while (llm.requests.length === 0) {
      assert.ok(Date.now() < deadline, 'the request never reached the server');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const started = performance.now();
    await llm.stop();
    await llm.stop();
    assert.ok(performance.now() - started < 1000, 'stop() waited for the pending answer');
    await assert.rejects(pending);
    await assert.rejects(chat(llm.baseUrl, REQUEST));
  });
});

describe('fake LLM server: hidden limit', () => {
  async function until(condition: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 5000;
    while (!condition()) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('answers 429 with retry-after at once to calls over maxConcurrent, and counts', async () => {
    await using llm = await startFakeLlmServer({
      apiKey: KEY,
      latencyMs: 1_000,
      hiddenLimit: { maxConcurrent: 2, retryAfterSeconds: 3 },
    });
    const held = [chat(llm.baseUrl, REQUEST), chat(llm.baseUrl, REQUEST)];
    await until(() => llm.stats().calls === 2, 'the first two calls');

    const over = await Promise.all([1, 2, 3].map(() => chat(llm.baseUrl, REQUEST)));
    for (const response of over) {
      assert.equal(response.status, 429);
      assert.equal(response.headers.get('retry-after'), '3');
      assert.equal(response.headers.get('x-ratelimit-remaining-requests'), null, 'not told');
      assert.equal(((await response.json()) as ErrorBody).error.code, 'rate_limit_exceeded');
    }
    assert.deepEqual(llm.stats(), { calls: 5, rateLimited: 3, succeeded: 0, maxInFlight: 3 });

    for (const response of await Promise.all(held)) {
      assert.equal(response.status, 200);
      await response.body?.cancel();
    }
    // Both answered: room again.
    const after = await chat(llm.baseUrl, REQUEST);
    assert.equal(after.status, 200);
    await after.body?.cancel();
    assert.deepEqual(llm.stats(), { calls: 6, rateLimited: 3, succeeded: 3, maxInFlight: 3 });
    assert.equal(llm.requests.length, 6);
  });

  it('answers 429 over requestsPerSecond, with retry-after-ms when asked', async () => {
    await using llm = await startFakeLlmServer({
      hiddenLimit: { requestsPerSecond: 2, retryAfterMs: 1_500 },
    });
    const statuses: number[] = [];
    let limited: Response | undefined;
    for (let i = 0; i < 3; i++) {
      const response = await chat(llm.baseUrl, REQUEST, {});
      statuses.push(response.status);
      if (response.status === 429) limited = response;
      else await response.body?.cancel();
    }
    assert.deepEqual(statuses, [200, 200, 429]);
    assert.equal(limited?.headers.get('retry-after-ms'), '1500');
    assert.equal(limited?.headers.get('retry-after'), '2');
    await limited?.body?.cancel();
    assert.deepEqual(llm.stats(), { calls: 3, rateLimited: 1, succeeded: 2, maxInFlight: 1 });
  });

  it('counts injected 429s too, and refuses nonsense hidden limits', async () => {
    await using llm = await startFakeLlmServer({ failures: [{ status: 429 }, { status: 500 }] });
    for (let i = 0; i < 3; i++) await (await chat(llm.baseUrl, REQUEST, {})).body?.cancel();
    assert.deepEqual(llm.stats(), { calls: 3, rateLimited: 1, succeeded: 1, maxInFlight: 1 });

    for (const hiddenLimit of [
      { maxConcurrent: 0 },
      { requestsPerSecond: 1.5 },
      { retryAfterSeconds: -1 },
      { retryAfterMs: Number.NaN },
    ]) {
      await assert.rejects(startFakeLlmServer({ hiddenLimit }), RangeError);
    }
  });
});

describe('fake web server', () => {
  it('serves the default pages with content types and counts hits', async () => {
    await using web = await startFakeWebServer();
    assert.match(web.baseUrl, /^http:\/\/127\.0\.0\.1:\d+$/);

    const index = await fetch(web.url('/'));
    assert.equal(index.status, 200);
    assert.equal(index.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(await index.text(), DEFAULT_PAGES['/']);

    const notes = await fetch(web.url('/notes.txt?x=1'));
    assert.equal(notes.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(await notes.text(), DEFAULT_PAGES['/notes.txt']);

    for (let i = 0; i < 2; i++) await (await fetch(web.url('/articles/backpressure'))).text();

    assert.equal(web.hits.get('/'), 1);
    assert.equal(web.hits.get('/notes.txt'), 1);
    assert.equal(web.hits.get('/articles/backpressure'), 2);
    assert.equal(web.hits.get('/articles/priorities'), undefined);
  });

  it('serves only the given pages, 404s and counts the rest', async () => {
    await using web = await startFakeWebServer({ pages: { '/doc': '<p>hello</p>', '/raw': 'x' } });
    assert.equal(await (await fetch(web.url('/doc'))).text(), '<p>hello</p>');
    const raw = await fetch(web.url('/raw'));
    assert.equal(raw.headers.get('content-type'), 'text/plain; charset=utf-8');
    await raw.body?.cancel();

    const missing = await fetch(web.url('/'));
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    const post = await fetch(web.url('/doc'), { method: 'POST', body: 'x' });
    assert.equal(post.status, 405);
    await post.body?.cancel();

    assert.deepEqual([...web.hits.entries()].sort(), [
      ['/', 1],
      ['/doc', 2],
      ['/raw', 1],
    ]);
  });

  it('refuses a page path without a leading slash', async () => {
    await assert.rejects(startFakeWebServer({ pages: { doc: 'x' } }), RangeError);
  });

  it('refuses connections after stop', async () => {
    const web = await startFakeWebServer();
    const url = web.url('/');
    await (await fetch(url)).text();
    await web.stop();
    await web.stop();
    await assert.rejects(fetch(url));
  });
});

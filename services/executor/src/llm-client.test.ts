import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, mock } from 'node:test';
import { HttpStatusError } from '@sluice/sdk';
import { startFakeLlmServer } from '../../../test/support/fake-llm-server.js';
import {
  DEFAULT_COMPLETION_TOKENS,
  MAX_LLM_ANSWER_BYTES,
  createLlmClient,
  estimateTokens,
} from './llm-client.js';
import { StepAbortError, classifyStepError, type AbortReason } from './classify-error.js';
import { createLlmGate, type LlmGateOptions } from './llm-gate.js';

const KEY = 'sk-client';
const GATE: LlmGateOptions = {
  minConcurrency: 1,
  maxConcurrency: 8,
  initialConcurrency: 4,
  backoffRatio: 0.9,
};
const MESSAGES = [{ role: 'user', content: 'Backpressure keeps queues short.' }] as const;

describe('LLM client', () => {
  it('answers a completion without a gate', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });
    const client = createLlmClient(
      { baseUrl: `${llm.baseUrl}/`, apiKey: KEY, model: 'gpt-test' },
      new AbortController().signal,
    );
    const answer = await client.chat({ messages: MESSAGES });
    assert.deepEqual(answer, {
      content: 'Summary: Backpressure keeps queues short.',
      model: 'gpt-test',
      usage: { promptTokens: 4, completionTokens: 5 },
    });
  });

  it('goes through the gate and reports how the call ended', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });
    const gate = createLlmGate(GATE);
    const client = createLlmClient(
      { baseUrl: llm.baseUrl, apiKey: KEY, model: 'gpt-test' },
      new AbortController().signal,
      gate,
    );
    await client.chat({ messages: MESSAGES });
    llm.failNext({ status: 429, retryAfterSeconds: 0 }, { status: 500 });
    // A 429 fails the call as before (the step is retried by class), with no retry in here.
    const limited = await client.chat({ messages: MESSAGES }).catch((error: unknown) => error);
    assert.ok(limited instanceof HttpStatusError);
    assert.equal(limited.status, 429);
    assert.equal(limited.retryAfterMs, 0);
    await assert.rejects(client.chat({ messages: MESSAGES }), { status: 500 });
    assert.equal(llm.stats().calls, 3);
    assert.deepEqual(
      { ...gate.snapshot(), latencyP95Ms: undefined },
      {
        // The 429 came with one call in flight: the limit backs off from that, not from 4.
        limit: 1,
        inFlight: 0,
        waiting: 0,
        calls: 3,
        rateLimited: 1,
        succeeded: 1,
        failed: 1,
        cancelled: 0,
        latencyP95Ms: undefined,
      },
    );
    gate.close();
  });

  it('gives the unused part of its token estimate back', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });
    const tokensPerMinute = 2 * DEFAULT_COMPLETION_TOKENS;
    const gate = createLlmGate({ ...GATE, tokensPerMinute });
    const client = createLlmClient(
      { baseUrl: llm.baseUrl, apiKey: KEY, model: 'gpt-test' },
      new AbortController().signal,
      gate,
    );
    await client.chat({ messages: MESSAGES }); // charged ~1,010 tokens up front, used 9
    // Without the correction this would wait about half a minute for the refill.
    const permit = gate.acquire({ estimatedTokens: tokensPerMinute - 100 });
    assert.equal(gate.snapshot().waiting, 0);
    (await permit).release({ ok: true, status: 200, latencyMs: 1 });
    gate.close();
  });

  it('an abort while waiting at the gate rejects with its reason and sends nothing', async () => {
    await using llm = await startFakeLlmServer({ apiKey: KEY });
    const gate = createLlmGate({ ...GATE, requestsPerMinute: 1 });
    const options = { baseUrl: llm.baseUrl, apiKey: KEY, model: 'gpt-test' };
    await createLlmClient(options, new AbortController().signal, gate).chat({ messages: MESSAGES });
    const controller = new AbortController();
    const waiting = createLlmClient(options, controller.signal, gate).chat({ messages: MESSAGES });
    const reason = new Error('task cancelled');
    controller.abort(reason);
    await assert.rejects(waiting, (error) => error === reason);
    assert.equal(llm.stats().calls, 1);
    assert.deepEqual(
      { calls: gate.snapshot().calls, inFlight: gate.snapshot().inFlight },
      { calls: 1, inFlight: 0 },
    );
    gate.close();
  });

  it('estimates tokens from the prompt and the declared or default completion', () => {
    const messages = [{ role: 'user', content: 'x'.repeat(400) }] as const;
    assert.equal(estimateTokens({ messages }), 100 + DEFAULT_COMPLETION_TOKENS);
    assert.equal(estimateTokens({ messages, maxTokens: 50 }), 150);
    assert.equal(estimateTokens({ messages, maxTokens: 0 }), 100 + DEFAULT_COMPLETION_TOKENS);
  });

  it('estimates a token for each Chinese, Japanese or Korean character, not one for four', () => {
    // Tokenizers give CJK text about a token a character: at 4 characters a token a budget of
    // tokens per minute admitted up to four times what the provider allows.
    const chinese = '背压让队列保持短小'.repeat(100); // 900 characters
    assert.equal(
      estimateTokens({ messages: [{ role: 'user', content: chinese }], maxTokens: 1 }),
      901,
    );
    const japanese = 'キューを短く保つ'.repeat(100); // 800 characters
    assert.equal(
      estimateTokens({ messages: [{ role: 'user', content: japanese }], maxTokens: 1 }),
      801,
    );
    const korean = '배압은 큐를 짧게'.repeat(100); // 700 Hangul, 200 spaces
    assert.equal(
      estimateTokens({ messages: [{ role: 'user', content: korean }], maxTokens: 1 }),
      751,
    );
    // An ideograph outside the BMP is one character, not two halves; the rest 4 to a token.
    const parts = [{ type: 'text', text: '背压'.repeat(10) }] as unknown as string;
    assert.equal(
      estimateTokens({ messages: [{ role: 'user', content: parts }], maxTokens: 1 }),
      20 + Math.ceil('[{"type":"text","text":""}]'.length / 4) + 1,
    );
    const mixed = `${'𠀀'.repeat(10)} ${'x'.repeat(399)}`;
    assert.equal(
      estimateTokens({ messages: [{ role: 'user', content: mixed }], maxTokens: 1 }),
      111,
    );
  });

  for (const maxTokens of [-1, 0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) {
    it(`a maxTokens of ${maxTokens} fails the call as a bad request before it is sent`, async () => {
      let requests = 0;
      await using endpoint = await startRawEndpoint((res) => {
        requests += 1;
        res.writeHead(400).end();
      });
      const gate = createLlmGate({ ...GATE, tokensPerMinute: 10_000 });
      const client = createLlmClient(
        { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
        new AbortController().signal,
        gate,
      );
      const error = await client.chat({ messages: MESSAGES, maxTokens }).catch((e: unknown) => e);
      assert.ok(error instanceof HttpStatusError, String(error));
      assert.match(error.message, /maxTokens must be a positive whole number/);
      assert.match(error.message, new RegExp(`got ${String(maxTokens)}`));
      // Asking again would not change it: a final bad request, not retried.
      assert.deepEqual(classifyStepError(error, undefined), {
        errorClass: 'unknown',
        message: error.message,
        retryable: false,
      });
      assert.equal(requests, 0);
      assert.equal(gate.snapshot().calls, 0);
      gate.close();
    });
  }
});

/** A chat-completions endpoint on loopback whose answers `answer` writes. */
async function startRawEndpoint(answer: (res: ServerResponse, req: IncomingMessage) => void) {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(res, req));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    async [Symbol.asyncDispose]() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('LLM client: answers it cannot use', () => {
  it('an endless answer fails the call once it is over the size limit, and frees its permit', async () => {
    let sent = 0;
    await using endpoint = await startRawEndpoint((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"choices":[{"message":{"content":"');
      const more = setInterval(() => {
        res.write('x'.repeat(256 * 1024));
        sent += 256 * 1024;
      }, 1);
      res.on('close', () => clearInterval(more));
    });
    const gate = createLlmGate(GATE);
    const client = createLlmClient(
      { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
      AbortSignal.timeout(10_000),
      gate,
    );
    await assert.rejects(client.chat({ messages: MESSAGES }), (error: Error) => {
      assert.match(error.message, /the LLM endpoint answered with more than \d+ bytes/);
      return true;
    });
    assert.ok(sent < 4 * MAX_LLM_ANSWER_BYTES, `${sent} bytes were read`);
    assert.equal(gate.snapshot().inFlight, 0);
    gate.close();
  });

  for (const [what, body] of [
    // A debugging proxy's page that echoes the request (its Authorization header too).
    ['an HTML page', '<html><body>502 Bad Gateway: {authorization}</body></html>'],
    ['truncated JSON', '{"choices":[{"message":{"content":"half'],
    ['JSON null', 'null'],
  ] as const) {
    it(`${what} with status 200 is a failure that says so`, async () => {
      await using endpoint = await startRawEndpoint((res, req) => {
        const echoed = body.replace('{authorization}', req.headers.authorization ?? '');
        res.writeHead(200, { 'content-type': 'text/html' }).end(echoed);
      });
      const client = createLlmClient(
        { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
        AbortSignal.timeout(10_000),
      );
      await assert.rejects(client.chat({ messages: MESSAGES }), (error: Error) => {
        assert.match(error.message, /^the LLM endpoint answered HTTP 200 with/);
        if (what === 'an HTML page') assert.match(error.message, /502 Bad Gateway/);
        assert.ok(!error.message.includes(KEY));
        return true;
      });
    });
  }

  // A 200 that brings no completion is a failed call: counted as a success, it raised the
  // adaptive limit (a sample 'ok') while every call failed, and the governor saw no failure.
  for (const [what, body] of [
    ['a body that is not JSON', '<html>maintenance</html>'],
    ['JSON that is not an object', '[1, 2]'],
    ['an object without choices[0].message.content', '{"choices":[]}'],
    ['an answer over the size limit', 'x'.repeat(MAX_LLM_ANSWER_BYTES + 1)],
  ] as const) {
    it(`${what} with status 200 counts as a failed call, not a success`, async () => {
      await using endpoint = await startRawEndpoint((res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      });
      const tokensPerMinute = 2 * DEFAULT_COMPLETION_TOKENS;
      // At a limit of 1, one success at full use raises it to 2.
      const gate = createLlmGate({ ...GATE, initialConcurrency: 1, tokensPerMinute });
      const client = createLlmClient(
        { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
        AbortSignal.timeout(10_000),
        gate,
      );
      await assert.rejects(
        client.chat({ messages: MESSAGES }),
        /^Error: the LLM endpoint answered/,
      );
      assert.deepEqual(
        { ...gate.snapshot(), latencyP95Ms: undefined },
        {
          limit: 1,
          inFlight: 0,
          waiting: 0,
          calls: 1,
          rateLimited: 0,
          succeeded: 0,
          failed: 1,
          cancelled: 0,
          latencyP95Ms: undefined,
        },
      );
      // The provider answered, so it counted the call: its charge stays (nothing says what it used).
      const next = gate.acquire({ estimatedTokens: tokensPerMinute - 100 });
      assert.equal(gate.snapshot().waiting, 1);
      gate.close();
      await assert.rejects(next, /closed/);
    });
  }

  // The error said only 'answered without choices[0].message.content', whatever the answer said
  // instead: the user could not tell a refusal or a content filter from a broken endpoint.
  for (const [what, body, says] of [
    [
      "the model's refusal",
      { choices: [{ message: { content: null, refusal: "I can't help with that." } }] },
      /without choices\[0\]\.message\.content: the model refused: I can't help with that\.$/,
    ],
    [
      'a content filter',
      { choices: [{ message: { content: null }, finish_reason: 'content_filter' }] },
      /without choices\[0\]\.message\.content \(finish_reason content_filter\)$/,
    ],
    [
      "a proxy's error with status 200",
      { error: { message: 'upstream model overloaded' } },
      /without choices\[0\]\.message\.content: upstream model overloaded$/,
    ],
  ] as const) {
    it(`an answer without content says why when it holds ${what}`, async () => {
      await using endpoint = await startRawEndpoint((res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
      const client = createLlmClient(
        { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
        AbortSignal.timeout(10_000),
      );
      await assert.rejects(client.chat({ messages: MESSAGES }), { message: says });
    });
  }

  it("a refused call says why, in the provider's words", async () => {
    const reason = "This model's maximum context length is 8192 tokens.";
    await using endpoint = await startRawEndpoint((res) => {
      res
        .writeHead(400, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: reason, type: 'invalid_request_error' } }));
    });
    const client = createLlmClient(
      { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
      AbortSignal.timeout(10_000),
    );
    await assert.rejects(client.chat({ messages: MESSAGES }), {
      name: 'HttpStatusError',
      status: 400,
      message: `the LLM endpoint answered HTTP 400: ${reason}`,
    });
  });

  it("a 429 that gives its delay only as retry-after-ms carries it to the step's retry", async () => {
    await using endpoint = await startRawEndpoint((res) => {
      res
        .writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '750' })
        .end(JSON.stringify({ error: { message: 'Rate limit reached' } }));
    });
    const client = createLlmClient(
      { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
      AbortSignal.timeout(10_000),
    );
    await assert.rejects(client.chat({ messages: MESSAGES }), {
      status: 429,
      retryAfterMs: 750,
    });
  });

  it('an unauthorized call does not quote what the provider says of the key', async () => {
    await using endpoint = await startRawEndpoint((res, req) => {
      const key = req.headers.authorization ?? '';
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: `Incorrect API key provided: ${key}` } }));
    });
    const client = createLlmClient(
      { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
      AbortSignal.timeout(10_000),
    );
    await assert.rejects(client.chat({ messages: MESSAGES }), {
      status: 401,
      message: 'the LLM endpoint answered HTTP 401',
    });
  });
});

describe("LLM client: a call cut by its step's abort", () => {
  // The step's timeout is a drop for the adaptive limit (the provider may be overloaded); a cancel
  // says nothing about the provider. The client never told them apart: a call cut before its
  // answer counted as a plain failure, one cut while its body came as a success.
  for (const phase of ['before the answer', 'while the body comes'] as const) {
    for (const [why, expected] of [
      ['timeout', { limit: 1, failed: 1, cancelled: 0 }],
      ['cancelled', { limit: 4, failed: 0, cancelled: 1 }],
    ] as Array<[AbortReason, { limit: number; failed: number; cancelled: number }]>) {
      it(`${phase}: a ${why} is ${why === 'timeout' ? 'a drop' : 'neither a success nor a drop'}`, async () => {
        let requests = 0;
        await using endpoint = await startRawEndpoint((res) => {
          requests += 1;
          if (phase === 'while the body comes') {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.write('{"choices":[{"message":{"content":"');
          }
        });
        // Whether the client has the answer's headers (fetch resolved).
        let answered = false;
        const realFetch = globalThis.fetch;
        const fetching = mock.method(
          globalThis,
          'fetch',
          async (...args: Parameters<typeof fetch>) => {
            const response = await realFetch(...args);
            answered = true;
            return response;
          },
        );
        try {
          const gate = createLlmGate(GATE); // a limit of 4
          const controller = new AbortController();
          const client = createLlmClient(
            { baseUrl: endpoint.baseUrl, apiKey: KEY, model: 'gpt-test' },
            controller.signal,
            gate,
          );
          const call = client.chat({ messages: MESSAGES });
          call.catch(() => {});
          await waitUntil(() => (phase === 'before the answer' ? requests === 1 : answered));
          const reason = new StepAbortError(why);
          controller.abort(reason);
          await assert.rejects(call, (error) => error === reason);
          const snapshot = gate.snapshot();
          assert.deepEqual(
            {
              limit: snapshot.limit,
              inFlight: snapshot.inFlight,
              succeeded: snapshot.succeeded,
              failed: snapshot.failed,
              cancelled: snapshot.cancelled,
            },
            { ...expected, inFlight: 0, succeeded: 0 },
          );
          gate.close();
        } finally {
          fetching.mock.restore();
        }
      });
    }
  }
});

/** Waits until `condition` holds, failing after 5 s. */
async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

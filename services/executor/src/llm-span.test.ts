import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { startTracing, type Tracing } from '@sluice/telemetry';
import { startFakeLlmServer, type FakeLlmServer } from '../../../test/support/fake-llm-server.js';
import { startHttpInstrumentation, type HttpInstrumentation } from './http-instrumentation.js';
import { createLlmClient } from './llm-client.js';
import { createLlmGate } from './llm-gate.js';
import { createSpanRecorder, type RecordedSpan, type SpanRecorder } from './span-recorder.js';

const KEY = 'sk-span';
const MESSAGES = [{ role: 'user', content: 'Backpressure keeps queues short.' }] as const;

const idOf = (span: RecordedSpan) => span.spanContext().spanId;
const parentOf = (span: RecordedSpan) => span.parentSpanContext?.spanId;

describe('LLM call spans', () => {
  let tracing: Tracing;
  let http: HttpInstrumentation;
  let recorder: SpanRecorder;
  let llm: FakeLlmServer;

  before(async () => {
    recorder = createSpanRecorder();
    tracing = startTracing({ serviceName: 'llm-span-test', spanProcessors: [recorder] });
    http = startHttpInstrumentation();
    llm = await startFakeLlmServer({ apiKey: KEY });
  });
  after(async () => {
    await llm.stop();
    http.stop();
    await tracing.shutdown();
  });
  beforeEach(() => recorder.clear());

  /** Calls the LLM inside a parent span (as a step handler does); returns the outcome. */
  async function chatInSpan(
    call: (client: ReturnType<typeof createLlmClient>) => Promise<unknown>,
  ): Promise<{ parent: string; outcome: unknown }> {
    const client = createLlmClient(
      { baseUrl: llm.baseUrl, apiKey: KEY, model: 'gpt-test' },
      new AbortController().signal,
    );
    return trace.getTracer('test').startActiveSpan('sluice.step summarize', async (span) => {
      try {
        const outcome = await call(client).catch((error: unknown) => error);
        return { parent: span.spanContext().spanId, outcome };
      } finally {
        span.end();
      }
    });
  }

  it('is a GenAI client span of the step, with the HTTP request as its child', async () => {
    const { parent } = await chatInSpan((client) =>
      client.chat({ messages: MESSAGES, model: 'gpt-big', maxTokens: 64 }),
    );
    const chat = await recorder.waitFor((s) => s.name === 'chat gpt-big');
    assert.equal(chat.kind, SpanKind.CLIENT);
    assert.equal(parentOf(chat), parent);
    assert.equal(chat.status.code, SpanStatusCode.UNSET);
    assert.deepEqual(
      {
        ...chat.attributes,
        'gen_ai.response.id': typeof chat.attributes['gen_ai.response.id'],
        'server.port': typeof chat.attributes['server.port'],
      },
      {
        'gen_ai.operation.name': 'chat',
        'gen_ai.system': 'openai',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-big',
        'gen_ai.request.max_tokens': 64,
        // The fake answers with the model asked for, and counts words as tokens.
        'gen_ai.response.model': 'gpt-big',
        'gen_ai.response.id': 'string',
        'gen_ai.usage.input_tokens': 4,
        'gen_ai.usage.output_tokens': 5,
        'server.address': '127.0.0.1',
        'server.port': 'number',
      },
    );
    const request = await recorder.waitFor((s) => parentOf(s) === idOf(chat));
    assert.equal(request.name, 'POST');
    assert.equal(request.kind, SpanKind.CLIENT);
    assert.equal(request.attributes['http.request.method'], 'POST');
    assert.equal(request.attributes['url.full'], `${llm.baseUrl}/chat/completions`);
    assert.equal(request.attributes['server.address'], '127.0.0.1');
    assert.equal(request.attributes['http.response.status_code'], 200);
    assert.equal(
      llm.requests.at(-1)?.headers.traceparent,
      `00-${request.spanContext().traceId}-${idOf(request)}-01`,
      'the request carries its own span as the traceparent',
    );
  });

  it('notes a 429 and its Retry-After, with error status', async () => {
    llm.failNext({ status: 429, retryAfterSeconds: 2 });
    const { outcome } = await chatInSpan((client) => client.chat({ messages: MESSAGES }));
    assert.equal((outcome as { status?: number }).status, 429);
    const chat = await recorder.waitFor((s) => s.name === 'chat gpt-test');
    assert.equal(chat.status.code, SpanStatusCode.ERROR);
    assert.match(chat.status.message ?? '', /HTTP 429/);
    assert.equal(chat.attributes['error.type'], '429');
    assert.equal(chat.attributes['sluice.llm.rate_limited'], true);
    assert.equal(chat.attributes['sluice.llm.retry_after_ms'], 2_000);
    assert.equal(chat.attributes['gen_ai.response.model'], undefined);
    assert.ok(chat.events.some((e) => e.name === 'exception'));
    const request = await recorder.waitFor((s) => parentOf(s) === idOf(chat));
    assert.equal(request.attributes['http.response.status_code'], 429);
    assert.equal(request.status.code, SpanStatusCode.ERROR);
  });

  it('marks a server error without calling it rate limited', async () => {
    llm.failNext({ status: 500 });
    await chatInSpan((client) => client.chat({ messages: MESSAGES }));
    const chat = await recorder.waitFor((s) => s.name === 'chat gpt-test');
    assert.equal(chat.status.code, SpanStatusCode.ERROR);
    assert.equal(chat.attributes['error.type'], '500');
    assert.equal(chat.attributes['sluice.llm.rate_limited'], undefined);
  });

  it('records the wait at the LLM gate as an event of the call', async () => {
    const gate = createLlmGate({
      minConcurrency: 1,
      maxConcurrency: 2,
      initialConcurrency: 1,
      backoffRatio: 0.9,
    });
    const client = createLlmClient(
      { baseUrl: llm.baseUrl, apiKey: KEY, model: 'gpt-test' },
      new AbortController().signal,
      gate,
    );
    await client.chat({ messages: MESSAGES });
    gate.close();
    const chat = await recorder.waitFor((s) => s.name === 'chat gpt-test');
    assert.deepEqual(
      chat.events.map((e) => e.name),
      ['sluice.llm.permit'],
    );
    // Without a step span around it the call is still traced, as a trace of its own.
    assert.equal(chat.parentSpanContext, undefined);
  });

  it('traces no request made outside any span', async () => {
    const response = await fetch(`${llm.baseUrl}/models`);
    await response.arrayBuffer();
    await chatInSpan((client) => client.chat({ messages: MESSAGES }));
    await recorder.waitFor((s) => s.name === 'POST');
    assert.deepEqual(
      recorder.spans.filter((s) => s.attributes['url.full'] === `${llm.baseUrl}/models`),
      [],
    );
  });
});

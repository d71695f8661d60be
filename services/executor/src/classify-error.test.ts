import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { HttpStatusError } from '@sluice/sdk';
import { classifyStepError, stepErrorMessage } from './classify-error.js';

describe('classifyStepError', () => {
  const zodError = (() => {
    try {
      z.object({ a: z.string() }).parse({});
    } catch (error) {
      return error;
    }
    throw new Error('zod accepted an invalid value');
  })();
  const cases: Array<[string, unknown, 'cancelled' | 'timeout' | undefined, string, boolean]> = [
    ['429', new HttpStatusError(429, 'x', 2_000), undefined, 'llm_rate_limit', true],
    ['500', new HttpStatusError(500, 'x'), undefined, 'external_5xx', true],
    ['503', new HttpStatusError(503, 'x'), undefined, 'external_5xx', true],
    ['401', new HttpStatusError(401, 'x'), undefined, 'permission_denied', false],
    ['403', new HttpStatusError(403, 'x'), undefined, 'permission_denied', false],
    [
      '404: asking again changes nothing',
      new HttpStatusError(404, 'x'),
      undefined,
      'unknown',
      false,
    ],
    ['400', new HttpStatusError(400, 'x'), undefined, 'unknown', false],
    ['408', new HttpStatusError(408, 'x'), undefined, 'tool_timeout', true],
    ['409', new HttpStatusError(409, 'x'), undefined, 'unknown', true],
    ['zod', zodError, undefined, 'schema_validation', false],
    ['timeout signal', new Error('aborted'), 'timeout', 'tool_timeout', true],
    ['cancel signal', new HttpStatusError(500, 'x'), 'cancelled', 'cancelled', false],
    ['plain error', new Error('boom'), undefined, 'unknown', true],
    ['a thrown string', 'boom', undefined, 'unknown', true],
  ];
  for (const [name, error, aborted, errorClass, retryable] of cases) {
    it(`classifies ${name} as ${errorClass}`, () => {
      const result = classifyStepError(error, aborted);
      assert.equal(result.errorClass, errorClass);
      assert.equal(result.retryable, retryable);
    });
  }

  it('keeps the delay a 429 asked for', () => {
    assert.equal(
      classifyStepError(new HttpStatusError(429, 'x', 2_000), undefined).retryAfterMs,
      2_000,
    );
    assert.equal(
      classifyStepError(new HttpStatusError(500, 'x'), undefined).retryAfterMs,
      undefined,
    );
  });

  it('shows U+0000 in a message as U+FFFD, which Postgres can store', () => {
    assert.equal(classifyStepError(new Error('bad\u0000byte'), undefined).message, 'bad\uFFFDbyte');
  });

  it('says what a value of any shape holds, without throwing', () => {
    const unreadable = new Error('x');
    Object.defineProperty(unreadable, 'message', {
      get() {
        throw new Error('message cannot be read');
      },
    });
    const throwingToString = {
      toString() {
        throw new Error('no');
      },
    };
    const cases: Array<[unknown, string]> = [
      [null, 'null'],
      [undefined, 'undefined'],
      [Symbol('s'), 'Symbol(s)'],
      [Object.assign(new Error(), { message: 42 }), 'Error: 42'],
      [Object.create(null), 'a thrown object that cannot be shown as text'],
      [throwingToString, 'a thrown object that cannot be shown as text'],
      [unreadable, 'a thrown object that cannot be shown as text'],
    ];
    for (const [value, message] of cases) {
      const result = classifyStepError(value, undefined);
      assert.deepEqual(
        { errorClass: result.errorClass, message: result.message },
        { errorClass: 'unknown', message },
      );
    }
  });

  it('shows what a thrown object that is no Error holds, not [object Object]', () => {
    const cyclic: Record<string, unknown> = { step: 'fetch' };
    cyclic.self = cyclic;
    const cases: Array<[unknown, string]> = [
      [{ message: 'quota exceeded', code: 'E_QUOTA' }, 'quota exceeded'],
      [{ error: 'bad gateway', status: 502 }, '{"error":"bad gateway","status":502}'],
      [cyclic, '[object Object]'],
    ];
    for (const [value, message] of cases) {
      assert.equal(classifyStepError(value, undefined).message, message);
    }
  });

  it('says why a request failed, not only that fetch failed', async () => {
    // A port nothing listens on any more: Node's TypeError says "fetch failed", its cause why.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const refused = await fetch(`http://127.0.0.1:${port}/`).then(
      () => assert.fail('port 9 answered'),
      (error: unknown) => error,
    );
    assert.match(
      classifyStepError(refused, undefined).message,
      new RegExp(`^fetch failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`),
    );
    const twice = new Error('outer', { cause: new Error('middle', { cause: 'inner' }) });
    assert.equal(classifyStepError(twice, undefined).message, 'outer: middle: inner');
    const quoted = new Error('read failed: socket hang up', { cause: new Error('socket hang up') });
    assert.equal(
      classifyStepError(quoted, undefined).message,
      'read failed: socket hang up',
      'a cause the message already quotes is not repeated',
    );
  });

  it('says why a request failed when the cause is an AggregateError without a message', () => {
    // What Node's fetch rejects with when a host name has an IPv6 and an IPv4 address and both
    // refuse (happy eyeballs): the cause's own message is empty, its errors say why.
    const cause = Object.assign(
      new AggregateError([
        new Error('connect ECONNREFUSED ::1:8080'),
        new Error('connect ECONNREFUSED 127.0.0.1:8080'),
      ]),
      { code: 'ECONNREFUSED' },
    );
    assert.equal(
      classifyStepError(new TypeError('fetch failed', { cause }), undefined).message,
      'fetch failed: connect ECONNREFUSED ::1:8080; connect ECONNREFUSED 127.0.0.1:8080',
    );
    const coded = Object.assign(new Error(''), { code: 'ETIMEDOUT' });
    assert.equal(
      classifyStepError(new TypeError('fetch failed', { cause: coded }), undefined).message,
      'fetch failed: ETIMEDOUT',
    );
  });

  it('stores no credential a handler error quotes (a query key, a bearer token, a URL password)', () => {
    const error = new Error(
      'GET https://api.example.com/v1/search?q=x&api_key=sk_live_abc123 failed; ' +
        'sent Authorization: Bearer eyJhbGciOi.payload.sig',
      { cause: new Error('connect postgres://app:hunter2@db.internal:5432/app refused') },
    );
    const { message } = classifyStepError(error, undefined);
    for (const secret of ['sk_live_abc123', 'eyJhbGciOi', 'hunter2']) {
      assert.ok(!message.includes(secret), `${secret} is stored: ${message}`);
    }
    assert.match(message, /api_key=\[redacted\]/);
    assert.match(message, /Bearer \[redacted\]/);
    assert.match(message, /postgres:\/\/app:\[redacted\]@db\.internal/);
  });

  it('scrubs a credential that straddles the 2,000-unit cut, and keeps the cut', () => {
    const url = 'postgres://app:hunter2-long-password@db/app';
    // The password starts before the cut; its `@`, which the scrubber needs, comes after it.
    const message = stepErrorMessage(`${'x'.repeat(1_980)} ${url} and more`);
    assert.ok(!message.includes('hunter2'), message.slice(1_970));
    assert.equal(message.length, 2_000);
    // A replacement longer than what it hides still leaves the message within the bound.
    const tokens = stepErrorMessage('Bearer a '.repeat(400));
    assert.ok(!/Bearer a\b/.test(tokens));
    assert.ok(tokens.length <= 2_000, String(tokens.length));
  });
});

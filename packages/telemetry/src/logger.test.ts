import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { DestinationStream } from 'pino';
import { createLogger, scrubSecrets } from './logger.js';
import { REDACTED, SECRET_QUERY_PARAMS, UNREADABLE } from './redaction.js';
import type { LogLevel } from './logger.js';
import { startTracing, withSpan } from './tracing.js';
import type { Tracing } from './tracing.js';

/** A destination that keeps each written line, parsed. */
function capture(): { destination: DestinationStream; lines: string[]; records: () => unknown[] } {
  const lines: string[] = [];
  return {
    destination: { write: (line: string) => void lines.push(line) },
    lines,
    records: () => lines.map((line) => JSON.parse(line) as unknown),
  };
}

function only(records: unknown[]): Record<string, unknown> {
  assert.equal(records.length, 1, 'expected exactly one log line');
  const [record] = records;
  assert.ok(typeof record === 'object' && record !== null);
  return record as Record<string, unknown>;
}

const SECRET = 'sk-very-secret-value-1234';

describe('createLogger', () => {
  it('writes JSON lines with the service, a level label and the message', () => {
    const out = capture();
    const log = createLogger({ service: 'scheduler', level: 'info', destination: out.destination });
    log.info({ task_id: 't-1' }, 'step done');
    log.debug('below the level');
    const record = only(out.records());
    assert.equal(record.service, 'scheduler');
    assert.equal(record.level, 'info');
    assert.equal(record.msg, 'step done');
    assert.equal(record.task_id, 't-1');
    assert.equal(typeof record.time, 'string');
  });

  const secretFields: Array<[string, Record<string, unknown>]> = [
    ['authorization', { authorization: `Bearer ${SECRET}` }],
    ['Authorization', { Authorization: `Bearer ${SECRET}` }],
    ['api_key', { api_key: SECRET }],
    ['apiKey', { apiKey: SECRET }],
    ['key', { key: SECRET }],
    ['password', { password: SECRET }],
    ['llm_api_key', { llm_api_key: SECRET }],
    ['x-api-key', { 'x-api-key': SECRET }],
    ['headers.authorization', { headers: { authorization: `Bearer ${SECRET}` } }],
    ['headers.x-api-key', { headers: { 'x-api-key': SECRET } }],
    ['config.llm_api_key', { config: { llm_api_key: SECRET, model: 'gpt' } }],
    ['client.apiKey', { client: { apiKey: SECRET } }],
    ['db.password', { db: { password: SECRET } }],
    ['req.headers.authorization', { req: { headers: { authorization: `Bearer ${SECRET}` } } }],
    ['secret', { key: { id: 'k-1' }, secret: SECRET }],
    ['token', { token: SECRET }],
    ['llmApiKey', { llmApiKey: SECRET }],
    ['SLUICE_LLM_API_KEY', { env: { SLUICE_LLM_API_KEY: SECRET } }],
    ['headers.cookie', { headers: { cookie: `session=${SECRET}` } }],
    ['headers.proxy-authorization', { headers: { 'proxy-authorization': `Basic ${SECRET}` } }],
  ];
  for (const [field, fields] of secretFields) {
    it(`never writes a secret in ${field}`, () => {
      const out = capture();
      const log = createLogger({ service: 'gateway', destination: out.destination });
      log.info(fields, 'calling upstream');
      log.child({ task_id: 't-2' }).warn(fields, 'again from a child logger');
      assert.equal(out.lines.length, 2);
      for (const line of out.lines) {
        assert.ok(!line.includes(SECRET), `secret leaked: ${line}`);
        assert.ok(line.includes(REDACTED), `no censor mark: ${line}`);
      }
    });
  }

  // The same names in another case or spelling (headers as code writes them, camelCase options),
  // with a value no text pattern would catch.
  const PLAIN = 'plain-secret-value';
  const respelledFields: Array<[string, Record<string, unknown>]> = [
    ['headers.X-Api-Key', { headers: { 'X-Api-Key': PLAIN } }],
    ['headers.Cookie', { headers: { Cookie: `session=${PLAIN}` } }],
    ['AUTHORIZATION', { AUTHORIZATION: PLAIN }],
    ['accessToken', { accessToken: PLAIN }],
    ['oauth.refreshToken', { oauth: { refreshToken: PLAIN } }],
    ['clientSecret', { clientSecret: PLAIN }],
    ['API_KEY', { API_KEY: PLAIN }],
    ['Password', { db: { Password: PLAIN } }],
  ];
  for (const [field, fields] of respelledFields) {
    it(`never writes a secret in ${field}`, () => {
      const out = capture();
      const log = createLogger({ service: 'gateway', destination: out.destination });
      log.info(fields, 'calling upstream');
      const [line = ''] = out.lines;
      assert.ok(!line.includes(PLAIN), `secret leaked: ${line}`);
      assert.ok(line.includes(REDACTED), `no censor mark: ${line}`);
    });
  }

  it('keeps fields whose names only contain a secret one', () => {
    const out = capture();
    const log = createLogger({ service: 'gateway', destination: out.destination });
    log.info({ key_prefix: 'slk_Ab12Cd', tokens: 12, token_count: 3, keyword: 'x' }, 'kept');
    const record = only(out.records());
    assert.equal(record.key_prefix, 'slk_Ab12Cd');
    assert.equal(record.tokens, 12);
    assert.equal(record.token_count, 3);
    assert.equal(record.keyword, 'x');
  });

  // Redaction by field name cannot see into text: these are scrubbed from the finished line.
  const secretTexts: Array<[string, string, string]> = [
    [
      'a bearer token quoted in an error message',
      `request failed: header Authorization: Bearer ${SECRET} was refused`,
      `Bearer ${REDACTED}`,
    ],
    [
      'a password in a database URL',
      `cannot connect to postgres://sluice:${SECRET}@db.internal:5432/sluice`,
      `postgres://sluice:${REDACTED}@db.internal:5432/sluice`,
    ],
    [
      'a Sluice API key',
      'key slk_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_ pasted',
      `slk_${REDACTED} pasted`,
    ],
    ['an LLM provider key', `using sk-proj-abcdefghijklmnopqrstuvwxyz012345`, `sk-${REDACTED}`],
    [
      'a key in the query string of a URL a step called',
      'https://serp.example/search?q=x&api_key=9f8e7d6c5b4a3210&hl=en answered HTTP 404',
      `https://serp.example/search?q=x&api_key=${REDACTED}&hl=en answered HTTP 404`,
    ],
  ];
  for (const [what, text, expected] of secretTexts) {
    it(`scrubs ${what} from the message and from an error`, () => {
      const out = capture();
      const log = createLogger({ service: 'executor', destination: out.destination });
      log.warn(text);
      log.error({ err: new Error(text) }, 'step failed');
      assert.equal(out.lines.length, 2);
      const secret = text.match(/(sk-|slk_)\S+|Bearer \S+|:[^:@/]+@|api_key=[^&]+/)?.[0] ?? SECRET;
      for (const line of out.lines) {
        assert.ok(!line.includes(SECRET) && !line.includes(secret), `secret leaked: ${line}`);
        assert.ok(line.includes(expected), `not scrubbed as expected: ${line}`);
      }
      // Still one JSON object per line.
      for (const record of out.records()) assert.equal(typeof record, 'object');
    });
  }

  // Each of these the executor redacted from the URLs it recorded, while the line scrubber had a
  // list of its own without them: a step's error quoting such a URL was logged with the key.
  for (const name of ['x-api-key', 'client-secret', 'llm_api_key', 'refresh-token', 'Cookie']) {
    it(`scrubs the value of a ${name} query parameter`, () => {
      const text = `GET https://tool.example/v1/search?q=x&${name}=${SECRET}&page=2 answered HTTP 500`;
      assert.equal(
        scrubSecrets(text),
        `GET https://tool.example/v1/search?q=x&${name}=${REDACTED}&page=2 answered HTTP 500`,
      );
    });
  }

  it('scrubs every query parameter of the shared list, as the executor redacts them', () => {
    assert.ok(SECRET_QUERY_PARAMS.has('api_key') && SECRET_QUERY_PARAMS.has('sig'));
    for (const name of SECRET_QUERY_PARAMS) {
      for (const spelled of [name, name.toUpperCase()]) {
        const scrubbed = scrubSecrets(`https://tool.example/?${spelled}=${SECRET}`);
        assert.equal(scrubbed, `https://tool.example/?${spelled}=${REDACTED}`, spelled);
      }
    }
  });

  it('scrubs a long line of dotted or dashed text in linear time', () => {
    // 100,000 characters: the old URL pattern took about half a minute on them.
    for (const text of ['a.'.repeat(50_000), 'a-'.repeat(50_000)]) {
      const started = performance.now();
      assert.equal(
        scrubSecrets(`${text} postgres://app:${SECRET}@db`),
        `${text} postgres://app:${REDACTED}@db`,
      );
      const tookMs = performance.now() - started;
      assert.ok(tookMs < 1_000, `scrubbing took ${Math.round(tookMs)} ms`);
    }
  });

  it('leaves text without credentials alone', () => {
    const texts = [
      'GET http://127.0.0.1:9/v1/chat/completions failed',
      '{"key_prefix":"slk_Ab12Cd","task":"task-trace-1","basic":"Basic setup"}',
      'nats://127.0.0.1:4222 and postgres://postgres@127.0.0.1:5432/sluice',
      'https://example.com/search?q=monkey&keyword=tokens&page=2',
    ];
    for (const text of texts) assert.equal(scrubSecrets(text), text);
  });

  it('censors secrets in the bindings of a child logger', () => {
    const out = capture();
    const log = createLogger({ service: 'gateway', destination: out.destination });
    log.child({ apiKey: SECRET, upstream: { headers: { authorization: SECRET } } }).info('x');
    const line = out.lines[0] ?? '';
    assert.ok(!line.includes(SECRET), `secret leaked: ${line}`);
    const record = only(out.records());
    assert.equal(record.apiKey, REDACTED);
    assert.deepEqual(record.upstream, { headers: { authorization: REDACTED } });
  });

  it('leaves the logged object as it was, and looks into class instances', () => {
    class Credentials {
      constructor(
        readonly user: string,
        readonly password: string,
      ) {}
    }
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    const fields = { db: new Credentials('sluice', SECRET), headers: { token: SECRET } };
    log.info(fields, 'connecting');
    assert.equal(fields.db.password, SECRET);
    assert.equal(fields.headers.token, SECRET);
    const record = only(out.records());
    assert.deepEqual(record.db, { user: 'sluice', password: REDACTED });
    assert.deepEqual(record.headers, { token: REDACTED });
  });

  it('writes the line, and throws nothing, for a value it cannot read', () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const response = {
      status: 500,
      token: SECRET,
      get body(): string {
        throw new TypeError('Body is unusable: Body has already been read');
      },
    };
    log.info({ proxy, step: 'fetch' }, 'a revoked proxy');
    log.warn({ response, step: 'fetch' }, 'a getter that throws');
    log.child({ response }).info('a child bound to it');
    assert.equal(out.lines.length, 3);
    for (const line of out.lines) assert.ok(!line.includes(SECRET), `secret leaked: ${line}`);
    const [revoked, getter] = out.records() as Record<string, unknown>[];
    assert.equal(revoked?.step, 'fetch');
    assert.equal(revoked?.proxy, UNREADABLE);
    assert.equal(getter?.step, 'fetch');
    assert.equal(getter?.response, UNREADABLE);
  });

  it('writes the line, and throws nothing, for a logged field whose getter throws', () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    const fields = {
      step: 'fetch',
      get body(): string {
        throw new TypeError('no body');
      },
    };
    log.info(fields, 'a field that cannot be read');
    const record = only(out.records());
    assert.equal(record.step, 'fetch');
    assert.equal(record.body, UNREADABLE);
  });

  it('keeps fields that are not secrets', () => {
    const out = capture();
    const log = createLogger({ service: 'gateway', destination: out.destination });
    log.info({ config: { model: 'gpt-test' }, headers: { 'content-type': 'json' } }, 'x');
    const record = only(out.records());
    assert.deepEqual(record.config, { model: 'gpt-test' });
    assert.deepEqual(record.headers, { 'content-type': 'json' });
  });

  it('refuses an unknown level and an empty service name', () => {
    assert.throws(
      () => createLogger({ service: 'x', level: 'verbose' as LogLevel }),
      (error: unknown) => error instanceof RangeError && /verbose/.test(error.message),
    );
    assert.throws(() => createLogger({ service: '' }), RangeError);
  });

  it('writes nothing at level silent', () => {
    const out = capture();
    createLogger({ service: 's', level: 'silent', destination: out.destination }).fatal('x');
    assert.equal(out.lines.length, 0);
  });
});

/** An error shaped as drizzle-orm's `DrizzleQueryError`, which the telemetry package does not use. */
class DrizzleQueryError extends Error {
  query: string;
  params: unknown[];
  override cause: unknown;
  constructor(query: string, params: unknown[], cause: unknown) {
    super(`Failed query: ${query}\nparams: ${params.join(',')}`);
    this.query = query;
    this.params = params;
    this.cause = cause;
  }
}

const STATEMENT = 'insert into "tasks" ("id", "input") values ($1, $2)';
const PARAM = 'the-customers-private-input';

function failedQuery(): DrizzleQueryError {
  const driverError = Object.assign(
    new Error('duplicate key value violates unique constraint "tasks_pkey"'),
    { name: 'PostgresError', code: '23505', severity: 'ERROR', constraint_name: 'tasks_pkey' },
  );
  return new DrizzleQueryError(STATEMENT, ['t-1', PARAM], driverError);
}

describe('createLogger with a failed query', () => {
  it("writes the driver's error, without the statement and its parameters", () => {
    const out = capture();
    const log = createLogger({ service: 'gateway', destination: out.destination });
    log.error({ err: failedQuery(), method: '/sluice.v1/CreateTask' }, 'gRPC handler failed');
    log.error(failedQuery());
    log.warn({ err: new Error('apply failed', { cause: failedQuery() }) }, 'batch failed');

    for (const line of out.lines) {
      assert.ok(!line.includes(PARAM), line);
      assert.ok(!line.includes('insert into'), line);
      assert.ok(!line.includes('Failed query'), line);
    }
    const [handler, bare, wrapped] = out.records() as Array<Record<string, unknown>>;
    const err = handler?.err as Record<string, unknown>;
    assert.equal(err.code, '23505');
    assert.equal(err.constraint_name, 'tasks_pkey');
    assert.equal(err.type, 'Error');
    assert.equal(err.message, 'duplicate key value violates unique constraint "tasks_pkey"');
    assert.match(String(err.stack), /^PostgresError: duplicate key value/);
    assert.equal(bare?.msg, 'duplicate key value violates unique constraint "tasks_pkey"');
    const wrappedErr = wrapped?.err as Record<string, unknown>;
    assert.equal(
      wrappedErr.message,
      'apply failed: duplicate key value violates unique constraint "tasks_pkey"',
    );
    assert.match(String(wrappedErr.stack), /caused by: PostgresError: duplicate key/);
  });
});

describe('createLogger with an error carrying a secret field', () => {
  it('censors the secret fields of the error as those of the logged object', () => {
    // Not of a shape the line scrubber knows.
    const key = 'plain-key-value-9876';
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    // As HTTP client errors carry the request they failed (axios's `config`, got's `options`).
    const error = Object.assign(new Error('Request failed with status code 401'), {
      status: 401,
      apiKey: key,
      config: { url: 'https://api.example.com/v1', headers: { 'X-Api-Key': key } },
    });
    log.warn({ err: error }, 'step failed');
    assert.ok(!out.lines.join('').includes(key), out.lines.join(''));
    const err = only(out.records()).err as Record<string, unknown>;
    assert.equal(err.status, 401);
    assert.equal(err.apiKey, REDACTED);
    assert.deepEqual(err.config, {
      url: 'https://api.example.com/v1',
      headers: { 'X-Api-Key': REDACTED },
    });
  });
});

describe('createLogger with an error with an unreadable field', () => {
  it('writes the message and stack, and the field as unreadable', () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    const error = new Error('handler gave up');
    Object.defineProperty(error, 'details', {
      enumerable: true,
      get() {
        throw new Error('no details');
      },
    });
    log.warn({ err: error }, 'step failed');
    const err = only(out.records()).err as Record<string, unknown>;
    assert.equal(err.message, 'handler gave up');
    assert.match(String(err.stack), /^Error: handler gave up/);
    assert.equal(err.details, UNREADABLE);
  });
});

describe('createLogger with a long error', () => {
  it('cuts the message and stack, keeping the stack frames and surrogate pairs whole', () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    // A handler error quoting a whole body; a pair (😀) straddles every likely cut.
    const body = 'b😀'.repeat(400_000);
    const error = new Error(`upstream answered 500: ${body}`, { cause: new Error(body) });
    Object.assign(error, { response: body });
    log.warn({ err: error }, 'step failed');
    log.warn(error);

    assert.equal(out.lines.length, 2);
    for (const line of out.lines) assert.ok(line.length < 64 * 1024, `${line.length} characters`);
    const [fields, bare] = out.records() as Array<Record<string, unknown>>;
    const err = fields?.err as Record<string, unknown>;
    for (const text of [err.message, err.stack, err.response, bare?.msg].map(String)) {
      assert.ok(text.length < 32 * 1024, `${text.length} characters`);
      assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(text), 'a lone high surrogate');
    }
    assert.match(String(err.message), /^upstream answered 500: b😀b😀/);
    assert.match(String(err.stack), /^Error: upstream answered 500: b😀/);
    // The frames after the message are kept.
    assert.match(String(err.stack), /\n {4}at .*logger\.test\.ts/);
    assert.match(String(err.stack), /caused by: Error: b😀/);
  });

  it('cuts a thrown string logged as the error', () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    // What a handler that throws a string (`throw await response.text()`) has its step failed with.
    log.warn({ err: 'b😀'.repeat(400_000) }, 'step failed');
    const err = String(only(out.records()).err);
    assert.ok(err.length < 32 * 1024, `${err.length} characters`);
    assert.match(err, /^b😀b😀/);
  });
});

describe('createLogger inside a span', () => {
  let tracing: Tracing;
  before(() => {
    tracing = startTracing({ serviceName: 'logger-test' });
  });
  after(() => tracing.shutdown());

  it('adds the trace_id and span_id of the active span, and none outside', async () => {
    const out = capture();
    const log = createLogger({ service: 'executor', destination: out.destination });
    const ids = await withSpan(tracing.tracer('test'), 'work', {}, async (span) => {
      // Across an await, to show the ids follow the async context rather than the call stack.
      await new Promise((resolve) => setImmediate(resolve));
      log.child({ task_id: 't-3' }).info('inside');
      return span.spanContext();
    });
    log.info('outside');

    const [inside, outside] = out.records() as Array<Record<string, unknown>>;
    assert.equal(inside?.trace_id, ids.traceId);
    assert.equal(inside?.span_id, ids.spanId);
    assert.match(String(inside?.trace_id), /^[0-9a-f]{32}$/);
    assert.equal(inside?.task_id, 't-3');
    assert.equal(outside?.msg, 'outside');
    assert.ok(!('trace_id' in (outside ?? {})));
    assert.ok(!('span_id' in (outside ?? {})));
  });
});

/**
 * Database client spans against the real Postgres, recorded in memory by the tracing SDK: the
 * conventions' attributes (from the pool's connection URL, never its password), the parent, the
 * times, a failure's SQLSTATE, and `recordIf` dropping the spans of empty polls.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { sql } from 'drizzle-orm';
import {
  startTracing,
  tracerFor,
  withContinuedSpan,
  withSpan,
  type Tracing,
  type TracingOptions,
} from '@sluice/telemetry';
import { openDatabase, type DatabaseHandle } from './client.js';
import { createTestDatabase, type TestDatabase } from './testing/index.js';
import { connectionAttributes, withDatabaseSpan } from './tracing.js';

type SpanProcessor = NonNullable<TracingOptions['spanProcessors']>[number];
type RecordedSpan = Parameters<SpanProcessor['onEnd']>[0];

/** Spans are handed over synchronously as they end: no waiting needed. */
const ended: RecordedSpan[] = [];
const recorder: SpanProcessor = {
  onStart: () => undefined,
  onEnd: (span) => void ended.push(span),
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

const PASSWORD = 'db-span-secret';

let database: TestDatabase;
let handle: DatabaseHandle;
let tracing: Tracing;
let host: string;
let port: number;

before(async () => {
  database = await createTestDatabase();
  // A password in the URL (trust authentication ignores it) that no span may show.
  const url = new URL(database.url);
  url.password = PASSWORD;
  host = url.hostname;
  port = url.port === '' ? 5432 : Number(url.port);
  handle = openDatabase(url.toString(), { max: 2 });
  tracing = startTracing({
    serviceName: 'db-tracing-test',
    spanProcessors: [recorder],
    env: { OTEL_TRACES_SAMPLER: 'always_on' },
  });
});

after(async () => {
  await tracing?.shutdown();
  await handle?.close();
  await database?.drop();
});

beforeEach(() => void ended.splice(0));

const databaseSpans = () => ended.filter((s) => s.instrumentationScope.name === '@sluice/db');

describe('withDatabaseSpan', () => {
  it('records a CLIENT span under the active span with the conventions’ attributes', async () => {
    const tracer = tracerFor('test');
    const before = Date.now();
    const rows = await withSpan(tracer, 'parent', {}, () =>
      withDatabaseSpan(
        handle.db,
        {
          summary: 'SELECT pg_sleep',
          operationName: 'SELECT',
          attributes: { 'sluice.test': 'yes' },
          resultAttributes: (result: unknown[]) => ({ 'sluice.rows': result.length }),
        },
        () => handle.sql`select pg_sleep(0.05)`.then((r) => [...r]),
      ),
    );
    const afterCall = Date.now();
    assert.equal(rows.length, 1);

    const [span] = databaseSpans();
    const parent = ended.find((s) => s.name === 'parent');
    assert.ok(span && parent);
    assert.equal(span.name, 'SELECT pg_sleep');
    assert.equal(span.kind, SpanKind.CLIENT);
    assert.equal(span.spanContext().traceId, parent.spanContext().traceId);
    assert.equal(span.parentSpanContext?.spanId, parent.spanContext().spanId);
    assert.deepEqual(span.attributes, {
      'db.system.name': 'postgresql',
      'db.namespace': database.name,
      'server.address': host,
      'server.port': port,
      'db.query.summary': 'SELECT pg_sleep',
      'db.operation.name': 'SELECT',
      'sluice.test': 'yes',
      'sluice.rows': 1,
    });
    assert.equal(span.status.code, SpanStatusCode.UNSET);
    // The times are the work's: at least the 50 ms sleep, within the call.
    const ms = (time: readonly [number, number]) => time[0] * 1_000 + time[1] / 1e6;
    assert.ok(ms(span.startTime) >= before - 1, 'starts when the call starts');
    assert.ok(ms(span.endTime) <= afterCall + 1, 'ends when the call ends');
    assert.ok(ms(span.duration) >= 45, `lasted ${ms(span.duration)} ms`);
  });

  it('never records the user, the password or the statement', async () => {
    await withDatabaseSpan(handle.db, { summary: 'SELECT' }, () => handle.sql`select 1`);
    const [span] = databaseSpans();
    assert.ok(span);
    const text = JSON.stringify(span.attributes);
    assert.ok(!text.includes(PASSWORD), text);
    assert.ok(!text.includes('select 1'), text);
    assert.equal(span.attributes['db.user'], undefined);
    assert.deepEqual(connectionAttributes(handle.db), {
      'db.system.name': 'postgresql',
      'db.namespace': database.name,
      'server.address': host,
      'server.port': port,
    });
  });

  it('records a failed statement with its SQLSTATE and rethrows', async () => {
    await assert.rejects(
      withDatabaseSpan(handle.db, { summary: 'SELECT' }, () =>
        handle.db.transaction((tx) => tx.execute('select 1 / 0')),
      ),
      (error: Error) => /division by zero/.test(`${error.message} ${String(error.cause)}`),
    );
    const [span] = databaseSpans();
    assert.ok(span);
    assert.equal(span.status.code, SpanStatusCode.ERROR);
    assert.equal(span.attributes['error.type'], '22012');
    assert.equal(span.attributes['db.response.status_code'], '22012');
    assert.ok(span.events.some((e) => e.name === 'exception'));
  });

  it('never records the statement or the parameters of a failed query', async () => {
    // drizzle's error quotes both in its message (`Failed query: … params: …`).
    const secret = 'db-span-parameter-secret';
    await assert.rejects(
      withDatabaseSpan(handle.db, { summary: 'SELECT' }, () =>
        handle.db.execute(sql`select ${secret}::text as echoed, 1 / ${0}::int as quotient`),
      ),
      (error: Error) => error.message.includes(secret),
    );
    const [span] = databaseSpans();
    assert.ok(span);
    const recorded = JSON.stringify([span.status, span.events, span.attributes]);
    assert.ok(!recorded.includes(secret), recorded);
    assert.ok(!recorded.includes('quotient'), recorded);
    assert.equal(span.status.message, 'division by zero');
    assert.equal(span.attributes['error.type'], '22012');
    const exception = span.events.find((e) => e.name === 'exception');
    assert.equal(exception?.attributes?.['exception.message'], 'division by zero');
  });

  it('names other failures by their code or name, without a response status', async () => {
    await assert.rejects(
      withDatabaseSpan(handle.db, { summary: 'SELECT' }, () => {
        throw new TypeError('not the database');
      }),
      TypeError,
    );
    const [span] = databaseSpans();
    assert.equal(span?.attributes['error.type'], 'TypeError');
    assert.equal(span?.attributes['db.response.status_code'], undefined);
  });

  it('drops the span of a result recordIf refuses, never that of a failure', async () => {
    const claim = (found: number) =>
      withDatabaseSpan(
        handle.db,
        {
          summary: 'UPDATE task_steps',
          recordIf: (n: number) => n > 0,
          resultAttributes: (n: number) => ({ 'sluice.claimed': n }),
        },
        async () => {
          await handle.sql`select 1`;
          return found;
        },
      );
    assert.equal(await claim(0), 0);
    assert.deepEqual(databaseSpans(), [], 'an empty poll leaves no span');
    assert.equal(await claim(3), 3);
    assert.deepEqual(
      databaseSpans().map((s) => s.attributes['sluice.claimed']),
      [3],
    );
    ended.splice(0);
    await assert.rejects(
      withDatabaseSpan(handle.db, { summary: 'X', recordIf: () => false }, () =>
        Promise.reject(new Error('lost')),
      ),
    );
    assert.equal(databaseSpans().length, 1);
  });

  it('starts a trace of its own outside any span', async () => {
    await withDatabaseSpan(handle.db, { summary: 'SELECT' }, () => handle.sql`select 1`);
    const [span] = databaseSpans();
    assert.ok(span);
    assert.equal(span.parentSpanContext, undefined);
  });
});

describe('the spans a failed query is run in', () => {
  it('keep its statement and parameters out, as its database span does', async () => {
    const secret = 'enclosing-span-parameter-secret';
    const tracer = tracerFor('test');
    await assert.rejects(
      withSpan(tracer, 'enclosing', {}, () =>
        withContinuedSpan(tracer, undefined, 'continued', {}, () =>
          handle.db.execute(sql`select ${secret}::text as echoed, 1 / ${0}::int as quotient`),
        ),
      ),
      (error: Error) => error.message.includes(secret),
    );
    for (const name of ['enclosing', 'continued']) {
      const span = ended.find((s) => s.name === name);
      assert.ok(span, name);
      const recorded = JSON.stringify([span.status, span.events]);
      assert.ok(!recorded.includes(secret), recorded);
      assert.ok(!recorded.includes('quotient'), recorded);
      assert.equal(span.status.code, SpanStatusCode.ERROR);
      assert.equal(span.status.message, 'division by zero');
    }
  });
});

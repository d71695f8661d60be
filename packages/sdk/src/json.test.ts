import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_JSON_DEPTH, toJson } from './json.js';

function problem(value: unknown): string {
  const result = toJson(value);
  assert.ok(!result.ok, 'expected a problem');
  return result.problem;
}

describe('toJson', () => {
  it('keeps plain data as it is', () => {
    const value = { a: [1, 'two', true, null, { b: -0.5 }], c: {}, d: [] };
    assert.deepEqual(toJson(value), { ok: true, value });
    assert.deepEqual(toJson(Object.assign(Object.create(null) as object, { x: 1 })), {
      ok: true,
      value: { x: 1 },
    });
  });

  it('drops undefined properties and turns a top-level undefined into null, as JSON does', () => {
    assert.deepEqual(toJson({ a: 1, b: undefined }), { ok: true, value: { a: 1 } });
    assert.deepEqual(toJson(undefined), { ok: true, value: null });
  });

  it('names the path of what JSON cannot carry', () => {
    assert.equal(
      problem({ rows: [{ at: new Date() }] }),
      '$.rows[0].at is a Date, not plain JSON data',
    );
    assert.equal(
      problem([1, Number.POSITIVE_INFINITY]),
      '$[1] is Infinity, which JSON cannot carry',
    );
    assert.equal(problem({ n: 10n }), '$.n is a bigint, which JSON cannot carry');
    assert.equal(problem({ f: () => 1 }), '$.f is a function, which JSON cannot carry');
    assert.equal(problem([undefined]), '$[0] is undefined');
    assert.equal(problem(new Map()), '$ is a Map, not plain JSON data');
  });

  it('refuses U+0000 in a string or a key, which Postgres cannot store', () => {
    assert.equal(
      problem({ rows: ['ok', 'a\u0000b'] }),
      '$.rows[1] holds the character U+0000 (NUL), which cannot be stored',
    );
    assert.equal(
      problem({ nested: { ['k\u0000']: 1 } }),
      '$.nested has a key holding U+0000 (NUL), which cannot be stored',
    );
  });

  it('refuses a lone UTF-16 surrogate in a string or a key, which jsonb refuses to store', () => {
    // Half an emoji (a string cut by length in UTF-16 units): JSON.stringify writes it as
    // `\ud83d`, which Postgres answers with "Unicode low surrogate must follow a high surrogate".
    const half = '😀 smile'.slice(0, 1);
    assert.equal(
      problem({ rows: ['ok', `text ${half}`] }),
      '$.rows[1] holds a lone UTF-16 surrogate (half a character), which cannot be stored',
    );
    assert.equal(
      problem({ nested: { [`k${half}`]: 1 } }),
      '$.nested has a key holding a lone UTF-16 surrogate (half a character), which cannot be stored',
    );
    assert.equal(
      problem(['\udc00 low half first']),
      '$[0] holds a lone UTF-16 surrogate (half a character), which cannot be stored',
    );
    assert.deepEqual(toJson({ '😀': 'ok 😀' }), { ok: true, value: { '😀': 'ok 😀' } });
  });

  it('keeps a key named __proto__ as data, as JSON.parse made it', () => {
    // E.g. a model's answer parsed with JSON.parse: `__proto__` is an own property there, and must
    // stay one (assigned with `=`, it would set the copy's prototype and vanish from the JSON).
    const parsed: unknown = JSON.parse('{"__proto__": {"admin": true}, "name": "x"}');
    const result = toJson(parsed);
    assert.ok(result.ok);
    assert.equal(JSON.stringify(result.value), '{"__proto__":{"admin":true},"name":"x"}');
    assert.equal(Object.getPrototypeOf(result.value), Object.prototype);
    const list = toJson([JSON.parse('{"__proto__": 1}')]);
    assert.ok(list.ok);
    assert.equal(JSON.stringify(list.value), '[{"__proto__":1}]');
  });

  it('refuses cycles but accepts the same object twice', () => {
    const shared = { x: 1 };
    assert.deepEqual(toJson([shared, shared]), { ok: true, value: [{ x: 1 }, { x: 1 }] });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    assert.equal(problem(cyclic), '$.self refers back to itself (a cycle)');
  });

  it('refuses nesting deeper than the limit', () => {
    let deep: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH; i += 1) deep = [deep];
    assert.ok(toJson(deep).ok);
    assert.match(problem([deep]), /nests deeper than 32 levels/);
  });
});

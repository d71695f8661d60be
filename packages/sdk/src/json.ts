/**
 * Step inputs and outputs are stored in Postgres as JSON and read back by other steps, possibly on
 * another executor, days later. A value that does not survive that trip unchanged (a `Date`, a
 * `Map`, `NaN`, a class instance, a cycle) would silently turn into something else there, so it is
 * refused when the step returns it, with the path of the offending part. So is the character
 * U+0000 in a string or key, and a lone UTF-16 surrogate (half a character, e.g. of an emoji cut by
 * a length limit): Postgres's `jsonb` cannot store them, and one such value would fail the write of
 * every outcome recorded with it.
 */
import { unstorableCharacter, type Json } from '@sluice/core';

const LONE_SURROGATE_WORDS = 'a lone UTF-16 surrogate (half a character)';

/** What a refusal of text Postgres cannot store names (see `unstorableCharacter`). */
export function unstorableCharacterWords(kind: 'nul' | 'lone_surrogate'): string {
  return kind === 'nul' ? 'the character U+0000 (NUL)' : LONE_SURROGATE_WORDS;
}

/** Deepest nesting a step's input or output may have (as the gateway allows for task input). */
export const MAX_JSON_DEPTH = 32;

/** The result of {@link toJson}. */
export type JsonCheck =
  { readonly ok: true; readonly value: Json } | { readonly ok: false; readonly problem: string };

/** How {@link toJson} reads a value. */
export interface ToJsonOptions {
  /**
   * Check a task's input, which the caller hands over as JSON text, rather than a step's output:
   * a value with a `toJSON` method (a `Date`) is replaced with what the method returns, as
   * `JSON.stringify` does (a step's output is refused instead: the step reading it back would get
   * a string where it returned a `Date`); and U+0000, lone surrogates and the depth are left to the
   * gateway, which refuses them as INVALID_ARGUMENT (they reach it unchanged, escaped).
   */
  readonly taskInput?: boolean;
}

/**
 * Checks that `value` is plain JSON data and returns it as {@link Json}: `undefined` object
 * properties are dropped (as `JSON.stringify` would), a top-level `undefined` becomes `null`.
 * Anything else that JSON cannot carry is a problem naming its path (`$.rows[3].at`).
 */
export function toJson(value: unknown, options: ToJsonOptions = {}): JsonCheck {
  const seen = new Set<object>();
  const problem = { message: '' };
  const { taskInput = false } = options;
  const visit = (given: unknown, path: string, depth: number, key: string): Json | undefined => {
    const node = taskInput ? withToJsonApplied(given, key) : given;
    if (node === undefined) {
      problem.message = `${path}.toJSON() returned undefined, which JSON cannot carry`;
      return undefined;
    }
    if (node === null || typeof node === 'boolean') return node;
    if (typeof node === 'string') {
      const unstorable = taskInput ? undefined : unstorableCharacter(node);
      if (unstorable === undefined) return node;
      problem.message = `${path} holds ${unstorableCharacterWords(unstorable)}, which cannot be stored`;
      return undefined;
    }
    if (typeof node === 'number') {
      if (Number.isFinite(node)) return node;
      problem.message = `${path} is ${String(node)}, which JSON cannot carry`;
      return undefined;
    }
    if (typeof node !== 'object') {
      problem.message = `${path} is a ${typeof node}, which JSON cannot carry`;
      return undefined;
    }
    if (!taskInput && depth >= MAX_JSON_DEPTH) {
      problem.message = `${path} nests deeper than ${MAX_JSON_DEPTH} levels`;
      return undefined;
    }
    if (seen.has(node)) {
      problem.message = `${path} refers back to itself (a cycle)`;
      return undefined;
    }
    seen.add(node);
    try {
      if (Array.isArray(node)) {
        const items: Json[] = [];
        for (let i = 0; i < node.length; i += 1) {
          const item: unknown = node[i];
          if (item === undefined) {
            problem.message = `${path}[${i}] is undefined`;
            return undefined;
          }
          const json = visit(item, `${path}[${i}]`, depth + 1, String(i));
          if (json === undefined) return undefined;
          items.push(json);
        }
        return items;
      }
      const proto = Object.getPrototypeOf(node) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        const kind = (node as { constructor?: { name?: unknown } }).constructor?.name;
        problem.message = `${path} is a ${typeof kind === 'string' ? kind : 'non-plain object'}, not plain JSON data`;
        return undefined;
      }
      // Collected, then made with Object.fromEntries: a key `__proto__` (JSON.parse makes it an
      // own property) stays data, where `object[key] = …` would set the copy's prototype instead.
      const entries: Array<[string, Json]> = [];
      for (const [key, item] of Object.entries(node)) {
        if (item === undefined) continue;
        const unstorable = taskInput ? undefined : unstorableCharacter(key);
        if (unstorable !== undefined) {
          const what = unstorable === 'nul' ? 'U+0000 (NUL)' : LONE_SURROGATE_WORDS;
          problem.message = `${path} has a key holding ${what}, which cannot be stored`;
          return undefined;
        }
        const json = visit(item, `${path}.${key}`, depth + 1, key);
        if (json === undefined) return undefined;
        entries.push([key, json]);
      }
      return Object.fromEntries(entries);
    } finally {
      seen.delete(node);
    }
  };
  if (value === undefined) return { ok: true, value: null };
  const json = visit(value, '$', 0, '');
  return json === undefined ? { ok: false, problem: problem.message } : { ok: true, value: json };
}

/** What `JSON.stringify` serialises in place of `value`: `value.toJSON(key)` when it has one. */
function withToJsonApplied(value: unknown, key: string): unknown {
  if ((typeof value !== 'object' || value === null) && typeof value !== 'bigint') return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  return typeof toJSON === 'function'
    ? (toJSON as (key: string) => unknown).call(value, key)
    : value;
}

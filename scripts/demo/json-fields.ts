/**
 * Reading the fields of a task's JSON output without trusting its shape: a field of the wrong type
 * reads as absent, so that a changed output shows as a mismatch in the demo instead of a crash.
 */

/** Typed reads of one JSON object (any other value reads as an empty object). */
export interface Fields {
  /** The string at `key`, or `undefined`. */
  text(key: string): string | undefined;
  /** The number at `key`, or `undefined`. */
  number(key: string): number | undefined;
  /** The objects of the array at `key` (other items left out); `[]` when it is not an array. */
  list(key: string): Fields[];
}

/** {@link Fields} of `value`. */
export function fieldsOf(value: unknown): Fields {
  const record: Record<string, unknown> =
    typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  return {
    text: (key) => (typeof record[key] === 'string' ? record[key] : undefined),
    number: (key) => (typeof record[key] === 'number' ? record[key] : undefined),
    list: (key) => {
      const items = record[key];
      return Array.isArray(items)
        ? items.filter((item) => typeof item === 'object' && item !== null).map(fieldsOf)
        : [];
    },
  };
}

/** The fields of a JSON text; a text that is not JSON reads as an empty object. */
export function parseFields(json: string): Fields {
  try {
    return fieldsOf(JSON.parse(json));
  } catch {
    return fieldsOf(undefined);
  }
}

/**
 * The JSON payloads of Sluice's own small NATS messages and KV values (the governor's decision,
 * executor reports, guard caps notices): bounded in size, UTF-8, parsed before any field is
 * trusted. Each message's module validates the parsed value itself.
 */
import { SluiceError } from '@sluice/core';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** How a payload's module names it in errors. */
export interface JsonPayloadKind {
  /** In an error message: `governor decision`, `executor report`. */
  readonly what: string;
  /** The field an error names for the payload as a whole: `decision`, `report`. */
  readonly field: string;
  readonly maxBytes: number;
  /** The module's own error for a field, as its validation makes them. */
  readonly invalid: (field: string, problem: string) => SluiceError;
}

/** A validated value as UTF-8 JSON. */
export function encodeJsonPayload(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/**
 * Parses a payload that is at most `kind.maxBytes` long and UTF-8 JSON.
 *
 * @throws SluiceError `invalid_argument` naming `kind.field` when it is longer or not UTF-8 JSON.
 */
export function parseJsonPayload(data: Uint8Array, kind: JsonPayloadKind): unknown {
  if (data.byteLength > kind.maxBytes) {
    throw kind.invalid(kind.field, `is ${data.byteLength} bytes, more than ${kind.maxBytes}`);
  }
  try {
    return JSON.parse(decoder.decode(data)) as unknown;
  } catch (cause) {
    throw new SluiceError('invalid_argument', `${kind.what} is not UTF-8 JSON`, {
      field: kind.field,
      cause,
    });
  }
}

/**
 * `value` as a JSON object — not `null`, not an array — for reading its fields.
 *
 * @throws SluiceError the kind's own `invalid_argument` naming `field` when it is anything else.
 */
export function jsonObject(
  value: unknown,
  field: string,
  kind: JsonPayloadKind,
): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw kind.invalid(field, 'must be a JSON object');
  }
  return value as Record<string, unknown>;
}

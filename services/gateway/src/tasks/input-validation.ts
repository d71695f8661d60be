/**
 * Validation of a task's input against its type's registered JSON Schema. Validators are compiled
 * once per (type, version) and schema: registering the same version again may replace its schema
 * (registerTaskType), and creates must then be checked against the new one.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { unstorableCharacter, type Json } from '@sluice/core';
import type { TaskTypeManifest } from '@sluice/db';
import { invalidArgument, type GrpcError } from '../grpc/index.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Deepest nesting accepted in an input (bounds parser and validator work). */
export const MAX_INPUT_DEPTH = 32;

/**
 * Parses and checks raw input text; returns the JSON value or the error to answer with.
 *
 * @param prefix put before the field an error names, e.g. `tasks[3].` for an entry of a batch.
 */
export function parseInput(text: string, maxBytes: number, prefix = ''): Json | GrpcError {
  const field = `${prefix}input`;
  if (text.trim() === '') return invalidArgument(field, 'input is required: a JSON document');
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    return invalidArgument(field, `input is ${bytes} bytes; at most ${maxBytes} are accepted`);
  }
  let value: Json;
  try {
    value = JSON.parse(text) as Json;
  } catch (error) {
    return invalidArgument(field, `input is not valid JSON: ${(error as Error).message}`);
  }
  if (nestsDeeperThan(value, MAX_INPUT_DEPTH)) {
    return invalidArgument(field, `input nests deeper than ${MAX_INPUT_DEPTH} levels`);
  }
  // Valid JSON (`"\u0000"`), but Postgres's jsonb cannot store it: refused here rather than
  // failing the write (and, in a group commit, the writes of the creates beside it). JSON can only
  // hold it escaped (JSON.parse refuses raw control characters), so text without the escape needs
  // no walk; with it (or with an escaped backslash before `u0000`), the parsed value decides.
  if (text.includes('\\u0000') && someString(value, (s) => s.includes('\u0000'))) {
    return invalidArgument(
      field,
      'input holds the character U+0000 (NUL), which cannot be stored; remove or replace it',
    );
  }
  // Valid JSON too (`"\uD800"` alone), but not Unicode text: Postgres's jsonb refuses a surrogate
  // escape without its pair, which failed the write (INTERNAL). Text received over gRPC is decoded
  // UTF-8, so only an escape can make one; text without a surrogate escape needs no walk.
  if (
    SURROGATE_ESCAPE.test(text) &&
    someString(value, (s) => unstorableCharacter(s) === 'lone_surrogate')
  ) {
    return invalidArgument(
      field,
      'input holds an unpaired UTF-16 surrogate (a \\uD800–\\uDFFF escape without its pair), ' +
        'which is not Unicode text and cannot be stored',
    );
  }
  // `1e400` is valid JSON too, but past a double's range JSON.parse makes it Infinity, which the
  // schema check accepts as a number and the write stored as `null` (JSON.stringify): the task ran
  // with another input than it was given. Only a number with an exponent (of any length: 251
  // digits times 10^99 overflow too), or of 309 digits or more, can overflow; text without one
  // needs no walk.
  if (LONG_NUMBER.test(text) && holdsInfinity(value)) {
    return invalidArgument(
      field,
      'input holds a number too large to represent (beyond ±1.7976931348623157e308)',
    );
  }
  return value;
}

/** A number with an exponent, or of 309 digits or more. */
const LONG_NUMBER = /\d[eE]|\d{309}/;

/** Whether a number of `value`, wherever it is nested, is infinite. */
function holdsInfinity(value: Json): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (value === null || typeof value !== 'object') return false;
  return (Array.isArray(value) ? value : Object.values(value)).some(holdsInfinity);
}

/** A `\uD800`–`\uDFFF` escape in JSON text (or an escaped backslash before such text). */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** Whether `test` holds for a string of `value`, or for a key of one of its objects. */
function someString(value: Json, test: (text: string) => boolean): boolean {
  if (typeof value === 'string') return test(value);
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some((child) => someString(child, test));
  return Object.entries(value).some(([key, child]) => test(key) || someString(child, test));
}

/**
 * Whether `value` nests deeper than `levelsLeft` levels. It descends no further than that:
 * JSON.parse builds far deeper values (20 kB of `[` is 10,000 levels), and a walk to their bottom
 * overflowed the stack.
 */
function nestsDeeperThan(value: Json, levelsLeft: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (levelsLeft === 0) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => nestsDeeperThan(child, levelsLeft - 1));
}

/** A compiled validator and the schema it was compiled from. */
interface CompiledSchema {
  /** The object given to Ajv (what it keeps, and what to remove from it). */
  readonly compiledFrom: Record<string, unknown>;
  /** The schema object last seen for this type and version: the usual check is by identity. */
  lastSeen: Record<string, unknown>;
  /** The schema as JSON text: a schema read anew (an equal, different object) is matched by it. */
  readonly text: string;
  readonly validate: ValidateFunction;
}

/** Compiles and caches validators of manifests: one per type and version, its latest schema. */
export class InputValidators {
  private readonly ajv = addFormats(new Ajv2020({ allErrors: false, strict: false }));
  private readonly compiled = new Map<string, CompiledSchema>();

  /**
   * Validates `input`; returns the error to answer with, or `undefined` when it is valid.
   *
   * @param prefix put before the field the error names, e.g. `tasks[3].` for an entry of a batch.
   */
  check(manifest: TaskTypeManifest, input: Json, prefix = ''): GrpcError | undefined {
    const validate = this.validatorOf(manifest);
    if (validate(input)) return undefined;
    const error = validate.errors?.[0];
    return invalidArgument(
      `${prefix}${fieldOf(error)}`,
      `input does not match ${manifest.name} v${manifest.version}: ${describe(error)}`,
    );
  }

  private validatorOf(manifest: TaskTypeManifest): ValidateFunction {
    const key = `${manifest.name}@${manifest.version}`;
    const schema = manifest.inputSchema;
    const known = this.compiled.get(key);
    // The manifest a create holds is usually the very object checked before (the gateway keeps
    // the types it read), so identity answers without serialising the schema.
    if (known?.lastSeen === schema) return known.validate;
    const text = JSON.stringify(schema);
    if (known?.text === text) {
      known.lastSeen = schema;
      return known.validate;
    }
    // Ajv keeps every schema it compiled (and refuses a second one with the same `$id`): the
    // replaced schema of this version is dropped from it first.
    if (known) this.ajv.removeSchema(known.compiledFrom);
    const validate = this.ajv.compile(schema);
    this.compiled.set(key, { compiledFrom: schema, lastSeen: schema, text, validate });
    return validate;
  }
}

/** The failing field as a dotted path under `input`, e.g. `input.sourceUrl`. */
function fieldOf(error: ErrorObject | undefined): string {
  if (!error) return 'input';
  const segments = error.instancePath.split('/').filter((s) => s.length > 0);
  const missing = (error.params as { missingProperty?: unknown }).missingProperty;
  if (error.keyword === 'required' && typeof missing === 'string') segments.push(missing);
  const extra = (error.params as { additionalProperty?: unknown }).additionalProperty;
  if (error.keyword === 'additionalProperties' && typeof extra === 'string') segments.push(extra);
  return ['input', ...segments].join('.');
}

function describe(error: ErrorObject | undefined): string {
  if (!error) return 'invalid';
  return `${fieldOf(error)} ${error.message ?? 'is invalid'}`;
}

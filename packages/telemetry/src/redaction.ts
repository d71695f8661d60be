/**
 * Censoring logged fields that may hold secrets, by name: each secret key at the top level of a
 * logged object, one level down (`{ headers: { authorization } }`, `{ config: { llm_api_key } }`),
 * and in the headers of a logged request or response (`{ req: { headers: { authorization } } }`).
 *
 * Why not pino's `redact` option: it compiles these paths (three per key, two with wildcards) into
 * a walk that costs ~60 µs per line even when nothing matches — ten times the rest of writing the
 * line, paid on every task's log lines. This looks at the few keys a line has and copies only the
 * objects it censors (the caller's object is never changed).
 *
 * Redaction covers logged objects only: never interpolate a secret into the message string (the
 * line scrubber in logger.ts catches the common credential shapes in text).
 */

/** The text written in place of a redacted value. */
export const REDACTED = '[redacted]';

/** Field names whose values are censored wherever this module looks, in any case or spelling. */
export const SECRET_KEYS: ReadonlySet<string> = new Set([
  'authorization',
  'Authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'api_key',
  'apiKey',
  'key',
  'secret',
  'client_secret',
  'token',
  'access_token',
  'refresh_token',
  'password',
  'llm_api_key',
  'llmApiKey',
  'SLUICE_LLM_API_KEY',
  'x-api-key',
]);

/**
 * {@link SECRET_KEYS} as names are compared: lower case, without `-` and `_`, so a name in another
 * case or spelling is one too (`X-Api-Key`, `API_KEY`, `accessToken`, `clientSecret`).
 */
const SECRET_KEY_FORMS: ReadonlySet<string> = new Set([...SECRET_KEYS].map(formOf));

function formOf(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, '');
}

/** Whether a field named `key` is censored. */
function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(key) || SECRET_KEY_FORMS.has(formOf(key));
}

/**
 * Query parameter names (lowercase; compare a name lowercased) whose values are credentials, as
 * many tool APIs take their key (`?api_key=…`, `&token=…`, a presigned URL's `sig`). The one list
 * for every place that quotes a URL: the logger's line scrubber (logger.ts) and the executor's
 * HTTP spans and error messages (its url-redaction.ts), so a name one of them redacts is never
 * shown whole by the other. The field names above, their dashed and joined spellings, and the
 * signature parameters of presigned URLs the OpenTelemetry conventions name.
 */
export const SECRET_QUERY_PARAMS: ReadonlySet<string> = new Set([
  ...[...SECRET_KEYS].map((key) => key.toLowerCase()),
  'api-key',
  'apikey',
  'access-token',
  'accesstoken',
  'refresh-token',
  'auth',
  'client-secret',
  'signature',
  'sig',
  'awsaccesskeyid',
  'x-goog-signature',
  'x-goog-credential',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
]);

type Fields = Record<string, unknown>;

/**
 * `fields` with every secret censored: the same object when it holds none, otherwise a copy in
 * which the censored values (and the objects holding them) are replaced.
 */
export function redactSecrets(fields: Fields): Fields {
  return redact(fields, 0);
}

/** How deep `redact` is: the logged object, an object in it, a `headers` object in that. */
type Depth = 0 | 1 | 2;

/**
 * What is written in place of a value that cannot be read: a revoked proxy, an object with a
 * getter that throws. (Left in, such a value fails pino's own serialization, which then writes the
 * line without any of its fields.)
 */
export const UNREADABLE = '[unreadable]';

function redact(fields: Fields, depth: Depth): Fields {
  let result: Fields | undefined;
  for (const key of Object.keys(fields)) {
    let value: unknown;
    let replacement: unknown;
    if (isSecretKey(key)) {
      replacement = REDACTED;
    } else {
      // A log call must not throw for what it is given: a handler's logger is handed anything.
      try {
        value = fields[key];
        replacement = redactBelow(key, value, depth);
      } catch {
        replacement = UNREADABLE;
      }
    }
    if (replacement === value) continue;
    result ??= { ...fields };
    result[key] = replacement;
  }
  return result ?? fields;
}

/** What is looked into below `depth`: any object of the logged one, then only its `headers`. */
function redactBelow(key: string, value: unknown, depth: Depth): unknown {
  if (!isFieldObject(value)) return value;
  if (depth === 0) return redact(value, 1);
  if (depth === 1 && key === 'headers') return redact(value, 2);
  return value;
}

/**
 * An object whose own fields are logged: not an array, a date, a buffer or an error (which the
 * `err` serializer writes); a class instance is, as pino's paths would have looked into it too.
 */
function isFieldObject(value: unknown): value is Fields {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    !(value instanceof Date) &&
    !(value instanceof Error) &&
    !ArrayBuffer.isView(value)
  );
}

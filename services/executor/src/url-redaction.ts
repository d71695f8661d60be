/**
 * Credentials in a URL's query string (`?api_key=…`, `?key=…`, a presigned URL's `sig`), replaced
 * before the URL is recorded: many tool APIs take their key there, and a span's `url.full` and
 * `url.query` are exported to whatever trace backend is configured, kept and shown to anyone who
 * reads traces. The replacement is `REDACTED`, as the OpenTelemetry HTTP conventions spell it.
 * The names are `SECRET_QUERY_PARAMS` of `@sluice/telemetry`, which its logger scrubs from log lines
 * too.
 */
import { SECRET_QUERY_PARAMS } from '@sluice/telemetry';

/** What a redacted value reads. */
export const REDACTED_QUERY_VALUE = 'REDACTED';

/**
 * `search` (`?a=1&api_key=x`, or '') with the value of every secret parameter replaced; the other
 * parameters stay exactly as they were written.
 */
export function redactQuery(search: string): string {
  if (search.length <= 1) return search;
  const parts = search.slice(1).split('&');
  const redacted = parts.map((part) => {
    const equals = part.indexOf('=');
    if (equals < 0) return part;
    return isSecretParam(part.slice(0, equals))
      ? `${part.slice(0, equals)}=${REDACTED_QUERY_VALUE}`
      : part;
  });
  return `?${redacted.join('&')}`;
}

function isSecretParam(encodedName: string): boolean {
  let name: string;
  try {
    name = decodeURIComponent(encodedName.replace(/\+/g, ' '));
  } catch {
    name = encodedName;
  }
  return SECRET_QUERY_PARAMS.has(name.trim().toLowerCase());
}

/** `url` with its query string's credentials (and any user:password) redacted, to quote it. */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url; // fetch refuses it before anything is quoted
  }
  parsed.search = redactQuery(parsed.search);
  if (parsed.password !== '') parsed.password = REDACTED_QUERY_VALUE;
  return parsed.toString();
}

/**
 * Reading the caller's API key from gRPC metadata. Looking it up (and so finding the tenant) is
 * the handlers' job; this module only parses.
 */
import type { Metadata } from '@grpc/grpc-js';

/** The metadata key carrying the credentials (gRPC metadata keys are lowercase). */
export const AUTHORIZATION_METADATA_KEY = 'authorization';

/**
 * Longest key accepted, in characters. Real keys are far shorter; the bound keeps an attacker's
 * megabyte header away from the hashing and the database.
 */
export const MAX_API_KEY_LENGTH = 256;

// RFC 7235: the scheme is case-insensitive; RFC 6750 token68 characters for the credentials.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/**
 * The API key of `authorization: Bearer <key>`, or `undefined` when the metadata has none,
 * has several `authorization` values, uses another scheme, or the key is malformed or longer
 * than {@link MAX_API_KEY_LENGTH}. Answer `undefined` with `unauthenticated()`.
 */
export function readBearerKey(metadata: Metadata): string | undefined {
  const values = metadata.get(AUTHORIZATION_METADATA_KEY);
  if (values.length !== 1) return undefined;
  const [value] = values;
  if (typeof value !== 'string') return undefined;
  const key = BEARER.exec(value)?.[1];
  if (key === undefined || key.length > MAX_API_KEY_LENGTH) return undefined;
  return key;
}

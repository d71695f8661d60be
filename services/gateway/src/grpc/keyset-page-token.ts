/**
 * Opaque page tokens of the listings that page by creation time and id (keyset pagination, stable
 * while rows are added): `ListTasks` and `ListDeadLetters`. A token carries its listing's tag and
 * the listing it was made for (its filters), so it continues that listing and no other; a token
 * that is not one of them decodes to `null`, for the API to refuse as INVALID_ARGUMENT.
 */
import { isWithinTimestampRange } from '@sluice/api';
import { isUuid } from '@sluice/db';

/** Where a page ended: the creation time and id of its last row. */
export interface KeysetPosition {
  readonly createdAt: Date;
  readonly id: string;
}

/** Encodes `position` in the listing `listing` (a string naming its filters) of kind `tag`. */
export function encodeKeysetPageToken(
  tag: string,
  position: KeysetPosition,
  listing: string,
): string {
  const value = { k: tag, c: position.createdAt.toISOString(), i: position.id, t: listing };
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * The position a token names; `null` when {@link encodeKeysetPageToken} did not make it with this
 * `tag` and `listing`.
 */
export function decodeKeysetPageToken(
  tag: string,
  token: string,
  listing: string,
): KeysetPosition | null {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null) return null;
    const { k, c, i, t } = value as Record<string, unknown>;
    if (k !== tag || t !== listing || typeof c !== 'string') return null;
    if (typeof i !== 'string' || !isUuid(i)) return null;
    const createdAt = new Date(c);
    // A time Postgres cannot compare with (before year 1, say) would fail the read: INTERNAL.
    return isWithinTimestampRange(createdAt) ? { createdAt, id: i } : null;
  } catch {
    return null;
  }
}

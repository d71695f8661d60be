/**
 * Opaque page tokens of `ListDeadLetters`: the creation time and id of the last letter of a page
 * (keyset pagination, stable while letters are added), bound to the tenant filter it was made for
 * so a token cannot silently continue a different listing.
 */
import { isWithinTimestampRange } from '@sluice/api';
import { isUuid, type DeadLetterCursor } from '@sluice/db';

/** Marks a token as ours and versions its format. */
const TOKEN_TAG = 'dead-letters.v1';

/** Encodes the position after `letter` in the listing filtered by `tenantId` (`''`: none). */
export function encodeDeadLetterPageToken(letter: DeadLetterCursor, tenantId: string): string {
  const value = { k: TOKEN_TAG, c: letter.createdAt.toISOString(), i: letter.id, t: tenantId };
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/** The cursor of a token made for `tenantId`; `null` when it is not one this module made for it. */
export function decodeDeadLetterPageToken(
  token: string,
  tenantId: string,
): DeadLetterCursor | null {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null) return null;
    const { k, c, i, t } = value as Record<string, unknown>;
    if (k !== TOKEN_TAG || t !== tenantId || typeof c !== 'string') return null;
    if (typeof i !== 'string' || !isUuid(i)) return null;
    const createdAt = new Date(c);
    // A time Postgres cannot compare with (before year 1, say) would fail the read: INTERNAL.
    return isWithinTimestampRange(createdAt) ? { createdAt, id: i } : null;
  } catch {
    return null;
  }
}

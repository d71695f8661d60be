/**
 * Opaque page tokens of `ListDeadLetters`: the creation time and id of the last letter of a page
 * (keyset pagination, stable while letters are added), bound to the tenant filter it was made for
 * so a token cannot silently continue a different listing.
 */
import type { DeadLetterCursor } from '@sluice/db';
import { decodeKeysetPageToken, encodeKeysetPageToken } from '../grpc/keyset-page-token.js';

/** Marks a token as ours and versions its format. */
const TOKEN_TAG = 'dead-letters.v1';

/** Encodes the position after `letter` in the listing filtered by `tenantId` (`''`: none). */
export function encodeDeadLetterPageToken(letter: DeadLetterCursor, tenantId: string): string {
  return encodeKeysetPageToken(TOKEN_TAG, letter, tenantId);
}

/** The cursor of a token made for `tenantId`; `null` when it is not one this module made for it. */
export function decodeDeadLetterPageToken(
  token: string,
  tenantId: string,
): DeadLetterCursor | null {
  return decodeKeysetPageToken(TOKEN_TAG, token, tenantId);
}

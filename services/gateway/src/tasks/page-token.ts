/**
 * Opaque page tokens of `ListTasks`: the creation time and id of the last task of a page (keyset
 * pagination, stable while tasks are added), bound to the filters the page was listed with, so a
 * token cannot silently continue another listing (the API refuses it as INVALID_ARGUMENT).
 */
import { isWithinTimestampRange } from '@sluice/api';
import { isUuid, type TaskRecord } from '@sluice/db';

/** Marks a token as ours and versions its format. */
const TOKEN_TAG = 'tasks.v1';

/** The filters of a listing, as `ListTasks` applies them (absent: not filtered by it). */
export interface TaskListingFilters {
  readonly status?: string | undefined;
  readonly type?: string | undefined;
  readonly priority?: number | undefined;
  readonly createdAfter?: Date | undefined;
  readonly createdBefore?: Date | undefined;
}

/** The filters in one canonical string: equal filters, equal strings. */
function listingOf(filters: TaskListingFilters): string {
  return JSON.stringify([
    filters.status ?? null,
    filters.type ?? null,
    filters.priority ?? null,
    filters.createdAfter?.getTime() ?? null,
    filters.createdBefore?.getTime() ?? null,
  ]);
}

/** Encodes the position after `task` in the listing with `filters`. */
export function encodePageToken(task: TaskRecord, filters: TaskListingFilters): string {
  const value = {
    k: TOKEN_TAG,
    c: task.createdAt.toISOString(),
    i: task.id,
    f: listingOf(filters),
  };
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * The position a token names in the listing with `filters`; `null` when {@link encodePageToken}
 * did not make it for those filters.
 */
export function decodePageToken(
  token: string,
  filters: TaskListingFilters,
): { createdAt: Date; id: string } | null {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null) return null;
    const { k, c, i, f } = value as Record<string, unknown>;
    if (k !== TOKEN_TAG || f !== listingOf(filters)) return null;
    if (typeof c !== 'string' || typeof i !== 'string' || !isUuid(i)) return null;
    const createdAt = new Date(c);
    // A time Postgres cannot compare with (before year 1, say) failed the read: INTERNAL.
    return isWithinTimestampRange(createdAt) ? { createdAt, id: i } : null;
  } catch {
    return null;
  }
}

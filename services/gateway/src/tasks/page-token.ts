/**
 * Opaque page tokens of `ListTasks`: the creation time and id of the last task of a page (keyset
 * pagination, stable while tasks are added), bound to the filters the page was listed with, so a
 * token cannot silently continue another listing (the API refuses it as INVALID_ARGUMENT).
 */
import type { TaskRecord } from '@sluice/db';
import {
  decodeKeysetPageToken,
  encodeKeysetPageToken,
  type KeysetPosition,
} from '../grpc/keyset-page-token.js';

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
  return encodeKeysetPageToken(TOKEN_TAG, task, listingOf(filters));
}

/**
 * The position a token names in the listing with `filters`; `null` when {@link encodePageToken}
 * did not make it for those filters.
 */
export function decodePageToken(token: string, filters: TaskListingFilters): KeysetPosition | null {
  return decodeKeysetPageToken(TOKEN_TAG, token, listingOf(filters));
}

/**
 * Opaque page tokens of `ListTasks`: the creation time and id of the last task of a page
 * (keyset pagination, stable while tasks are added).
 */
import { isUuid, type TaskRecord } from '@sluice/db';

/** Encodes the position after `task`. */
export function encodePageToken(task: TaskRecord): string {
  return Buffer.from(JSON.stringify({ c: task.createdAt.toISOString(), i: task.id })).toString(
    'base64url',
  );
}

/** Decodes a token; `null` when it is not one {@link encodePageToken} made. */
export function decodePageToken(token: string): { createdAt: Date; id: string } | null {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (typeof value !== 'object' || value === null) return null;
    const { c, i } = value as { c?: unknown; i?: unknown };
    if (typeof c !== 'string' || typeof i !== 'string' || !isUuid(i)) return null;
    const createdAt = new Date(c);
    // A time Postgres cannot compare with (before year 1, say) failed the read: INTERNAL.
    return isTimeOfTask(createdAt) ? { createdAt, id: i } : null;
  } catch {
    return null;
  }
}

/** 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z, in milliseconds. */
const EARLIEST_MS = -62_135_596_800_000;
const LATEST_MS = 253_402_300_799_999;

/** Whether `date` is a valid time of years 1 to 9999 (every task's, and what Postgres can compare). */
function isTimeOfTask(date: Date): boolean {
  const ms = date.getTime();
  return ms >= EARLIEST_MS && ms <= LATEST_MS;
}

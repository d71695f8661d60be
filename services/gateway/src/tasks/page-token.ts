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
    return Number.isNaN(createdAt.getTime()) ? null : { createdAt, id: i };
  } catch {
    return null;
  }
}

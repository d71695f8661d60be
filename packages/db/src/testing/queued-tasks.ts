/**
 * Tasks in their first state, many at once, for tests that need rows to work on (a relay's events,
 * a dispatcher's steps) rather than a particular create.
 */
import type { Database } from '../client.js';
import { submitTasks } from '../queries/task-batch.js';
import type { TaskTypeManifest } from '../queries/task-types.js';

/**
 * Creates `count` tasks of `taskType` for `tenantId` (P2, empty input) in one batch, each with its
 * first step ready and its `create` event; their ids, in the batch's order.
 *
 * @throws Error when any of them was not created (the tenant or the type is unknown).
 */
export async function createQueuedTasks(
  db: Database,
  tenantId: string,
  taskType: TaskTypeManifest,
  count: number,
): Promise<string[]> {
  const results = await submitTasks(
    db,
    Array.from({ length: count }, () => ({ tenantId, taskType, priority: 2 as const, input: {} })),
  );
  return results.map((result) => {
    if (result.kind !== 'created') throw new Error(`a queued task was not created: ${result.kind}`);
    return result.task.id;
  });
}

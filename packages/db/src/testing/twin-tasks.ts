/**
 * Comparing what two ways of making one change wrote, on twin tasks (the same request on two tasks
 * in the same state): their histories without what differs between two tasks by nature.
 */
import type { Executor } from '../client.js';
import { listTaskEvents } from '../queries/tasks.js';

/** A task's events as written: sequence, type, states, step and data (no ids, no times). */
export async function eventsAsWritten(executor: Executor, taskId: string) {
  const events = await listTaskEvents(executor, taskId, 0);
  return events.map(({ seq, type, fromStatus, toStatus, step, data }) => ({
    seq,
    type,
    fromStatus,
    toStatus,
    step,
    data,
  }));
}

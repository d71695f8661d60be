/**
 * Test states no API makes directly: a task that finished long ago (what retention deletes), and
 * a session blocked on a lock (the moment a race is decided).
 */
import type postgres from 'postgres';

/**
 * Marks a created task `status` as of `finishedAt`, its steps succeeded then and its events
 * published (the relay saw them): a task retention may delete once `finishedAt` is old enough.
 */
export async function markTaskFinished(
  sql: postgres.Sql,
  taskId: string,
  finishedAt: Date,
  status = 'succeeded',
): Promise<void> {
  const at = finishedAt.toISOString();
  await sql`update tasks set status = ${status}, finished_at = ${at} where id = ${taskId}`;
  await sql`update task_steps set status = 'succeeded', finished_at = ${at}
    where task_id = ${taskId}`;
  await sql`delete from task_event_outbox
    where event_id in (select id from task_events where task_id = ${taskId})`;
}

/** Waits until some session of `sql`'s database waits for a lock (e.g. an insert on a key). */
export async function waitForLockWaiter(sql: postgres.Sql, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock'`;
    if ((row?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('no session started waiting for a lock');
}

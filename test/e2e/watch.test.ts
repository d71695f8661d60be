/**
 * How `WatchTask` streams end, against the machine's real NATS and Postgres: after the event that
 * makes the task final, also when the caller has seen that event already (a reconnect after a
 * broken stream resumes from it), and on a retry of a finished task, with that retry's events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TaskEvent } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import { startGatewayFixture, type GatewayFixture } from '../support/gateway-fixture.js';

const INPUT = { topic: 'watching', sourceUrl: 'https://example.com/watch' };
/** Far longer than a stream that ends needs; a stream still open then never ended by itself. */
const ENDS_WITHIN_MS = 5_000;

let fx: GatewayFixture;
let client: TaskClient;

before(async () => {
  fx = await startGatewayFixture('watch_end');
  client = fx.client(await fx.tenantWithKey('acme'));
});

after(async () => {
  await fx?.stop();
});

/** The events a watch streams after `afterSeq`, and whether the stream ended by itself. */
async function watch(
  taskId: string,
  afterSeq: number,
): Promise<{ events: string[]; ended: boolean }> {
  const signal = AbortSignal.timeout(ENDS_WITHIN_MS);
  const events: TaskEvent[] = [];
  for await (const event of client.watchTask(taskId, afterSeq, signal)) events.push(event);
  return { events: events.map((e) => `${e.seq}:${e.type}`), ended: !signal.aborted };
}

describe('WatchTask of a cancelled task', () => {
  it('streams the history and ends after the final event', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    await client.cancelTask(task.task_id, 'not needed');
    assert.deepEqual(await watch(task.task_id, 0), {
      events: ['1:create', '2:cancel'],
      ended: true,
    });
  });

  it('ends at once when the caller saw the final event already', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    await client.cancelTask(task.task_id, 'not needed');
    assert.deepEqual(await watch(task.task_id, 2), { events: [], ended: true });
  });

  it('follows a retry made since, until the task is final again', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    await client.cancelTask(task.task_id, 'not needed');
    await client.retryTask(task.task_id);
    const watched = watch(task.task_id, 2);
    // The task was queued again when the watch began: it follows the task to its next end.
    await new Promise((resolve) => setTimeout(resolve, 200));
    await client.cancelTask(task.task_id, 'not needed after all');
    assert.deepEqual(await watched, { events: ['3:retry', '4:cancel'], ended: true });
  });
});

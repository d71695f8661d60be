/**
 * `WatchTask` replays a long history at once, however many reads it takes, against the machine's
 * real NATS and Postgres: a read that found as many events as it asks for read on at the next
 * notice or re-check (2 s by default), a pause per 1,000 events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGatewayFixture, type GatewayFixture } from '../support/gateway-fixture.js';

const INPUT = { topic: 'watching', sourceUrl: 'https://example.com/watch' };
/** Far longer than the replay needs, far shorter than a re-check. */
const REPLAYED_WITHIN_MS = 10_000;

describe('WatchTask of a long history', () => {
  const EVENTS = 2_500;
  let slow: GatewayFixture;

  before(async () => {
    // Re-checks a minute apart: a replay that waited for one would not finish in the test's time.
    slow = await startGatewayFixture('watch_long', { env: { SLUICE_WATCH_RECHECK_MS: '60000' } });
  });

  after(async () => {
    await slow?.stop();
  });

  it('streams every event at once, however many reads it takes', async () => {
    const tasks = slow.client(await slow.tenantWithKey('acme'));
    const { task } = await tasks.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P2',
      input: INPUT,
    });
    await slow.database.sql`
      insert into task_events (task_id, tenant_id, seq, type)
      select ${task.task_id}::uuid, 'acme', seq, 'step_progress'
      from generate_series(2, ${EVENTS}) as seq`;
    await slow.database.sql`update tasks set last_event_seq = ${EVENTS} where id = ${task.task_id}`;
    const signal = AbortSignal.timeout(REPLAYED_WITHIN_MS);
    let received = 0;
    for await (const event of tasks.watchTask(task.task_id, 0, signal)) {
      received += 1;
      if (Number(event.seq) === EVENTS) break;
    }
    assert.equal(received, EVENTS, 'every event before the watch gave up');
  });
});

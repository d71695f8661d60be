/**
 * The event relay's wake-ups from Postgres across a restart: the notifications raised while the
 * listening connection was down reach no one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import postgres from 'postgres';
import { startPostgresServer, withinSeconds } from '../testing/index.js';
import { TASK_EVENTS_CHANNEL, listenForTaskEvents } from './events.js';

describe('listenForTaskEvents', () => {
  it('wakes the relay once it listens again after a restart, and on each notification', async () => {
    // Without the wake on listening again, a restart cost the relay its wake-ups: the events
    // committed between Postgres coming back and the listen being made again notified no one, and
    // waited for the relay's idle poll (5 s by default) to be published.
    await using server = await startPostgresServer();
    const client = postgres(server.url, { max: 1, onnotice: () => {}, backoff: () => 0.05 });
    try {
      let wakes = 0;
      let woken: () => void = () => {};
      const nextWake = () => new Promise<void>((resolve) => (woken = resolve));
      await listenForTaskEvents(client, () => {
        wakes += 1;
        woken();
      });
      const before = wakes;
      const afterRestart = nextWake();
      await server.restart();
      assert.notEqual(await withinSeconds(10, afterRestart), 'too late', 'woken after the restart');
      assert.ok(wakes > before);
      const notified = nextWake();
      await client`select pg_notify(${TASK_EVENTS_CHANNEL}, '')`;
      assert.notEqual(await withinSeconds(10, notified), 'too late', 'woken by a notification');
    } finally {
      await client.end({ timeout: 5 });
    }
  });
});

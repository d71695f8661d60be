import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LiveSystems } from './live-systems.js';

test('a stop during a setup tears the system down once that setup settled, and only once', async () => {
  const live = new LiveSystems();
  const calls: string[] = [];
  let finishSetup: () => void = () => undefined;
  const system = live.track({
    setup: () => {
      calls.push('setup');
      return new Promise<void>((resolve) => (finishSetup = resolve));
    },
    teardown: () => {
      calls.push('teardown');
      return Promise.resolve();
    },
  });
  const setup = system.setup();
  const stopped = live.stop((error) => assert.fail(String(error)));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(calls, ['setup'], 'no teardown beside a setup under way');
  finishSetup();
  await setup;
  await stopped;
  await system.teardown(); // The run's own teardown, after the interrupt's.
  assert.deepEqual(calls, ['setup', 'teardown']);
  await assert.rejects(
    live.track({ setup: assert.fail, teardown: assert.fail }).setup(),
    /stopping/,
  );
});

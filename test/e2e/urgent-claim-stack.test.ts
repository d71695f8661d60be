/**
 * The urgent claim (`SLUICE_URGENT_CLAIM=on`, the default) on the whole stack: a P0 task's first step reaches
 * its executor with no scheduler running (the gateway claimed and published it), and once the
 * scheduler runs, the task goes on and succeeds with each step dispatched and run once — the
 * gateway's dispatch is an ordinary one to the executor, the outcome applier and the reconciler.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startLatchServer, type LatchServer } from '../support/latch-server.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'lifecycle-task-types.ts',
);

let e2e: E2eStack;
let latch: LatchServer;

before(async () => {
  latch = await startLatchServer();
  e2e = await startE2eStack({
    label: 'urgent-claim',
    resources: ['tool:latch'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      SLUICE_URGENT_CLAIM: 'on',
    },
  });
  await e2e.stack.startExecutor('tool:latch');
});

after(async () => {
  await e2e?.stop();
  await latch?.stop();
});

/** Resolves when the step `<task>:<step>` calls the latch; fails after a minute. */
async function arrival(key: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!latch.arrivals.some((a) => a.key === key)) {
    if (Date.now() > deadline) throw new Error(`${key} did not reach the latch`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the urgent claim on the stack', () => {
  it('runs a P0 task’s first step without the scheduler, then the task to success', async () => {
    const { task } = await e2e.client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P0',
      input: { label: 'urgent' },
    });
    const id = task.task_id;
    await arrival(`${id}:one`);

    await e2e.stack.startScheduler();
    for (const step of ['one', 'two', 'three']) {
      await arrival(`${id}:${step}`);
      latch.release(`${id}:${step}`);
    }
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { task: now } = await e2e.client.getTask(id);
      if (now.status === 'TASK_STATUS_SUCCEEDED') break;
      assert.ok(Date.now() < deadline, `the task succeeds; it is ${now.status}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const steps = await e2e.handle.sql<{ name: string; attempts: number; dispatches: number }[]>`
      select name, attempts, dispatch_count as dispatches
      from task_steps where task_id = ${id} order by seq`;
    assert.deepEqual(
      steps.map((s) => [s.name, s.attempts, s.dispatches]),
      [
        ['one', 1, 1],
        ['two', 1, 1],
        ['three', 1, 1],
      ],
    );
    assert.equal(
      latch.arrivals.filter((a) => a.key.startsWith(`${id}:`)).length,
      3,
      'each step ran once',
    );
  });
});

/**
 * Admission limits in the whole stack: two schedulers and two executors of one resource, with more
 * executor slots than the resource's limit (a `resource_limits` row). The tool (the latch server)
 * holds every call until the test releases it, so the calls it holds are exactly the steps running
 * at once; their count never exceeds the limit, and every task still finishes.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { setResourceLimit } from '@sluice/db';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startLatchServer, type LatchArrival, type LatchServer } from '../support/latch-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'lifecycle-task-types.ts',
);
const LIMIT = 3;
const SLOTS_PER_EXECUTOR = 4;
const TASKS = 8;
const STEPS_PER_TASK = 3;

let e2e: E2eStack;
let latch: LatchServer;

before(async () => {
  latch = await startLatchServer();
  e2e = await startE2eStack({
    label: 'admission',
    maxConnections: 4,
    resources: ['tool:latch'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      SLUICE_EXECUTOR_SLOTS: String(SLOTS_PER_EXECUTOR),
      SLUICE_SCHEDULER_POLL_MS: '100',
    },
  });
  await setResourceLimit(e2e.handle.db, 'tool:latch', LIMIT);
  await e2e.stack.startScheduler();
  await e2e.stack.startExecutor('tool:latch');
});

after(async () => {
  await e2e?.stop();
  await latch?.stop();
});

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => T | undefined,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('admission limits across replicas', () => {
  it('never runs more steps of a resource at once than its limit', async () => {
    const { client, handle } = e2e;
    const ids: string[] = [];
    for (let index = 0; index < TASKS; index += 1) {
      const { task } = await client.createTask({
        type: 'lc-linear',
        priority: 'PRIORITY_P1',
        input: { label: `limited-${index}` },
      });
      ids.push(task.task_id);
    }
    const released = new Set<string>();
    const held = (): LatchArrival[] =>
      latch.arrivals.filter((a) => !a.aborted && !released.has(a.key));
    // The limit fills: 8 slots and 8 ready steps, 3 admitted.
    await eventually(() => (held().length >= LIMIT ? true : undefined), 'the limit is in use');
    // Calls held only grow between two releases, so the count just before each release is the
    // most there were since the previous one.
    let most = 0;
    for (let done = 0; done < TASKS * STEPS_PER_TASK; done += 1) {
      const waiting = await eventually(
        () => (held().length > 0 ? held() : undefined),
        'a step calls the tool',
      );
      most = Math.max(most, waiting.length);
      const first = waiting[0] as LatchArrival;
      released.add(first.key);
      latch.release(first.key);
    }
    assert.equal(most, LIMIT, `at most ${LIMIT} calls at once, and the limit was reached`);
    for (const id of ids) {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const { task } = await client.getTask(id);
        if (task.status === 'TASK_STATUS_SUCCEEDED') break;
        assert.ok(Date.now() < deadline, `task ${id} succeeded (is ${task.status})`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    await assertDatabaseInvariants(handle, { requireFinal: true });
  });
});

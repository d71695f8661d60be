/**
 * The reconciler in the whole stack: JetStream loses the dispatched work in the middle of a run (the
 * executor dies and the steps stream is purged), and every task still finishes, each step's success
 * recorded once. One executor slot holds one step at a latch, so the other tasks' first steps wait
 * in the stream (or the dead executor's buffer) when it is purged.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createBusCatalog } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startLatchServer, type LatchServer } from '../support/latch-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'lifecycle-task-types.ts',
);
const TASKS = 6;

let e2e: E2eStack;
let latch: LatchServer;

before(async () => {
  latch = await startLatchServer();
  e2e = await startE2eStack({
    label: 'reconciler',
    maxConnections: 4,
    resources: ['tool:latch'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      SLUICE_EXECUTOR_SLOTS: '1',
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_ACK_WAIT_MS: '2000',
      SLUICE_HEARTBEAT_MS: '200',
      SLUICE_RECONCILE_INTERVAL_MS: '200',
      SLUICE_DISPATCH_GRACE_MS: '500',
      SLUICE_STEP_STALE_MS: '2500',
    },
  });
});

after(async () => {
  await e2e?.stop();
  await latch?.stop();
});

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('reconciler in the stack', () => {
  it('re-dispatches the steps lost with a purged stream, and every task finishes', async () => {
    const { client, handle, prefix, stack } = e2e;
    const ids: string[] = [];
    for (let index = 0; index < TASKS; index += 1) {
      const { task } = await client.createTask({
        type: 'lc-linear',
        priority: 'PRIORITY_P1',
        input: { label: `lost-${index}` },
      });
      ids.push(task.task_id);
    }
    // One step runs (held at its latch); the other first steps wait in the stream.
    await eventually(async () => {
      const [row] = await handle.sql<{ running: number; waiting: number }[]>`
        select count(*) filter (where status = 'running')::int as running,
          count(*) filter (where status = 'dispatched' and publish_seq is not null)::int as waiting
        from task_steps`;
      return row && row.running === 1 && row.waiting === TASKS - 1 ? row : undefined;
    }, 'one step runs and the others wait in the stream');

    // The executor dies with the running step and whatever messages it had pulled already.
    const executor = stack.executors.get('tool:latch');
    assert.ok(executor, 'a tool:latch executor runs');
    executor.kill('SIGKILL');
    await executor.exited;
    const nc = await connect({ servers: natsUrl() });
    try {
      const jsm = await jetstreamManager(nc);
      const purged = await jsm.streams.purge(createBusCatalog(prefix).streams.steps);
      assert.ok(purged.purged >= 1, `purged ${purged.purged} dispatches`);
    } finally {
      await nc.close();
    }
    await stack.startExecutor('tool:latch');
    for (const id of ids)
      for (const step of ['one', 'two', 'three']) latch.release(`${id}:${step}`);

    for (const id of ids) {
      await eventually(async () => {
        const { task } = await client.getTask(id);
        return task.status === 'TASK_STATUS_SUCCEEDED' ? task : undefined;
      }, `task ${id} succeeded`);
    }
    const steps = await handle.sql<{ task_id: string; seq: number; status: string }[]>`
      select task_id, seq, status from task_steps order by task_id, seq`;
    assert.equal(steps.length, TASKS * 3, 'three steps per task, none duplicated');
    assert.ok(
      steps.every((step) => step.status === 'succeeded'),
      'every step succeeded',
    );
    const [redispatched] = await handle.sql<{ count: number }[]>`
      select count(*)::int as count from task_steps where seq = 1 and dispatch_count >= 2`;
    assert.ok(redispatched?.count === TASKS, 'the lost first steps were dispatched again');
    const [successes] = await handle.sql<{ count: number }[]>`
      select count(*)::int as count from task_events where type = 'step_succeeded'`;
    assert.equal(successes?.count, TASKS * 3, "each step's success recorded once");
    await assertDatabaseInvariants(handle, { requireFinal: true });
  });
});

/**
 * Work reaches the scheduler without its poll (set to a minute here):
 * - a step kept back by its tenant's cap is admitted as soon as a slot of that tenant frees: the
 *   finished step's result wakes the dispatcher because the last admission pass left a due ready
 *   step behind (freed-slots.ts). The step that finishes is the last of its task, so no new ready
 *   step wakes the dispatcher instead;
 * - a step that failed is tried again when its backoff ends: the outcome pass that armed the
 *   task's backoff timer wakes the timer loop, which sleeps until the timer is due and then fires
 *   it (batch-loop.ts, timer-firer.ts);
 * - a fan-out branch that failed beside a running sibling is tried again when its backoff ends:
 *   its task goes on running, so no timer is armed, and the outcome pass tells the dispatcher when
 *   the branch falls due (`wakeIn`).
 *
 * The order is made certain without sleeps: acme's cap is 1 and acme's task A holds it (at its
 * last step) when acme's task B is created; then globex's task C is created and reaches the latch,
 * which shows that an admission pass after B's creation has run (and left B behind).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { createTenant, setTenantLimit } from '@sluice/db';
import { createTaskClient, type TaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startLatchServer, type LatchServer } from '../support/latch-server.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'lifecycle-task-types.ts',
);
/** Far longer than the tests wait: only a wake-up, or a known due time, can move the work in time. */
const POLL_MS = 60_000;
const ADMITTED_WITHIN_MS = 20_000;
/** The first retry of an `unknown` error waits up to a second (full jitter). */
const RETRIED_WITHIN_MS = 20_000;

let e2e: E2eStack;
let latch: LatchServer;
let globex: TaskClient;

before(async () => {
  latch = await startLatchServer();
  e2e = await startE2eStack({
    label: 'freed-slot',
    resources: ['tool:latch', 'llm'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      SLUICE_SCHEDULER_POLL_MS: String(POLL_MS),
    },
  });
  await createTenant(e2e.handle.db, { id: 'globex' });
  globex = createTaskClient({
    address: e2e.stack.grpcAddress,
    apiKey: await e2e.createApiKey({ tenantId: 'globex' }),
  });
  await setTenantLimit(e2e.handle.db, {
    tenantId: e2e.tenantId,
    resource: 'tool:latch',
    floor: 0,
    cap: 1,
  });
  await e2e.stack.startScheduler();
  await e2e.stack.startExecutor('tool:latch');
});

after(async () => {
  globex?.close();
  await e2e?.stop();
  await latch?.stop();
});

/** Resolves when the step `<task>:<step>` called the latch `times` times; fails after `timeoutMs`. */
async function arrival(key: string, timeoutMs = 60_000, times = 1): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (latch.arrivals.filter((a) => a.key === key).length < times) {
    if (Date.now() > deadline) {
      throw new Error(`${key} did not reach the latch ${times} time(s) in ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a freed slot', () => {
  it('admits the step its tenant’s cap kept back, without waiting for the poll', async () => {
    const create = (client: TaskClient, label: string) =>
      client.createTask({ type: 'lc-linear', priority: 'PRIORITY_P2', input: { label } });
    const a = (await create(e2e.client, 'a')).task.task_id;
    for (const step of ['one', 'two']) {
      await arrival(`${a}:${step}`);
      latch.release(`${a}:${step}`);
    }
    await arrival(`${a}:three`);
    const b = (await create(e2e.client, 'b')).task.task_id;
    const c = (await create(globex, 'c')).task.task_id;
    await arrival(`${c}:one`);
    assert.ok(!latch.arrivals.some((x) => x.key === `${b}:one`), 'B waits for acme’s slot');

    latch.release(`${a}:three`);
    await arrival(`${b}:one`, ADMITTED_WITHIN_MS);
    for (const key of [`${b}:one`, `${c}:one`]) latch.release(key);
  });
});

describe('a failed step', () => {
  it('is tried again when its backoff ends, without waiting for the poll', async () => {
    const d = (
      await globex.createTask({ type: 'lc-linear', priority: 'PRIORITY_P2', input: { label: 'd' } })
    ).task.task_id;
    await arrival(`${d}:one`);
    // The first attempt fails (an `unknown` error, retried after a backoff of up to a second).
    latch.fail(`${d}:one`, 503);
    await arrival(`${d}:one`, RETRIED_WITHIN_MS, 2);
    latch.release(`${d}:one`);
    // Done with retries (the latch answers a failed key's next call with the failure too, so a
    // third attempt may come): no backoff of this task ends during the next test, whose retry
    // must start with no other work's wake-up to carry it.
    await arrival(`${d}:two`, RETRIED_WITHIN_MS);
  });
});

describe('a failed fan-out branch', () => {
  it('is tried again when its backoff ends while a sibling runs, without waiting for the poll', async () => {
    const f = (
      await globex.createTask({
        type: 'lc-fan',
        priority: 'PRIORITY_P2',
        input: { count: 2, latched: true },
      })
    ).task.task_id;
    await arrival(`${f}:leaf0`);
    await arrival(`${f}:leaf1`);
    // leaf1 stays at the latch: the task runs on while leaf0 waits out its backoff.
    latch.fail(`${f}:leaf0`, 503);
    await arrival(`${f}:leaf0`, RETRIED_WITHIN_MS, 2);
    for (const key of [`${f}:leaf0`, `${f}:leaf1`]) latch.release(key);
  });
});

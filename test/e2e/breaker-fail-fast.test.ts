/**
 * Fail-fast while a circuit breaker is open, in the whole stack (issue 5: "… or they fail fast as
 * retryable if the task prefers"). The breaker of `tool:flaky` is forced open by an operator
 * override; a task whose step declares `whileBreakerOpen: 'fail'` then fails fast — retryable at
 * first, `failed_terminal` once its attempts ran out, the error naming the breaker — without a
 * single call reaching the tool, while a task of the same resource with the default (`wait`) stays
 * queued, GetTask saying why. Once the override is cleared, the waiting task runs and succeeds.
 *
 * The breaker's state is watched on the `governorDecisions` subject, the live view the scheduler
 * and the executors obey.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createBusCatalog, decodeDecision, type BreakerView } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import { addOverride, clearOverride } from '@sluice/db';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeToolServer, type FakeToolServer } from '../support/fake-tool-server.js';
import { assertDatabaseInvariants } from '../support/invariants.js';
import { FAIL_FAST_ATTEMPTS } from './breaker-fail-fast-task-types.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'breaker-fail-fast-task-types.ts',
);
const RESOURCE = 'tool:flaky';
const BREAKER_MESSAGE = `circuit breaker of ${RESOURCE} is open`;

type BreakerStatus = BreakerView | 'closed';

/** The breaker of {@link RESOURCE} as the latest decision announced it, and how often since. */
const watch = { status: undefined as BreakerStatus | undefined, repeats: 0 };

let e2e: E2eStack;
let tool: FakeToolServer;
let nc: NatsConnection;

before(async () => {
  tool = await startFakeToolServer();
  e2e = await startE2eStack({
    label: 'breaker-fail-fast',
    maxConnections: 4,
    resources: [RESOURCE],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_TOOL_URL: tool.baseUrl,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_GOVERNOR_INTERVAL_MS: '200',
      SLUICE_REPORT_INTERVAL_MS: '200',
    },
  });
  nc = await connect({ servers: natsUrl() });
  nc.subscribe(createBusCatalog(e2e.prefix).subjects.governorDecisions, {
    callback: (error, message) => {
      if (error) return;
      const status = decodeDecision(message.data).breakers?.[RESOURCE] ?? 'closed';
      watch.repeats = status === watch.status ? watch.repeats + 1 : 1;
      watch.status = status;
    },
  });
});

after(async () => {
  await nc?.close();
  await e2e?.stop();
  await tool?.stop();
});

/** Polls `probe` until it returns a value; fails after the deadline. */
async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits until the decisions have announced `status` at least twice (every service heard it). */
async function breakerAnnounced(status: BreakerStatus): Promise<void> {
  await eventually(
    () => (watch.status === status && watch.repeats >= 2 ? true : undefined),
    `the breaker is announced ${status} (seen ${watch.status ?? 'nothing'})`,
  );
}

async function createTask(type: 'bff-fail' | 'bff-wait', label: string): Promise<string> {
  const { task } = await e2e.client.createTask({
    type,
    priority: 'PRIORITY_P1',
    input: { label },
  });
  return task.task_id;
}

async function statusOf(id: string): Promise<string> {
  const [row] = await e2e.handle.sql<{ status: string }[]>`
    select status from tasks where id = ${id}::uuid
  `;
  return row?.status ?? 'missing';
}

async function waitForStatus(id: string, status: string): Promise<void> {
  await eventually(
    async () => ((await statusOf(id)) === status ? true : undefined),
    `task ${id} is ${status}`,
  );
}

describe('circuit breaker fail-fast', () => {
  it('fails a task that prefers it fast and for good, while a waiting task stays queued', async () => {
    // Closed: both types run normally (the fail-fast option changes nothing then).
    const warmUp = [
      await createTask('bff-fail', 'warm-fail'),
      await createTask('bff-wait', 'warm'),
    ];
    for (const id of warmUp) await waitForStatus(id, 'succeeded');
    assert.equal(tool.calls, 2);
    await breakerAnnounced('closed');

    // An operator forces the breaker open; the governor applies it within an interval.
    const override = await addOverride(e2e.handle.db, {
      kind: 'breaker',
      target: RESOURCE,
      value: 'open',
      reason: 'e2e: fail-fast while open',
    });
    await breakerAnnounced('open');
    const callsWhileOpen = tool.calls;

    const waiting = await createTask('bff-wait', 'patient');
    const failing = await createTask('bff-fail', 'impatient');

    // The fail-fast task: retryable failures first, then failed for good, without calling the tool.
    await waitForStatus(failing, 'failed_terminal');
    const { task: failed } = await e2e.client.getTask(failing);
    assert.equal(failed.status, 'TASK_STATUS_FAILED_TERMINAL');
    assert.equal(failed.error?.error_class, 'ERROR_CLASS_EXTERNAL_5XX');
    assert.equal(failed.error?.message, BREAKER_MESSAGE);
    const transitions = await e2e.handle.sql<{ type: string; data: Record<string, unknown> }[]>`
      select type, data from task_events where task_id = ${failing}::uuid order by seq
    `;
    const types = transitions.map((event) => event.type);
    assert.equal(
      types.filter((type) => type === 'step_failed').length,
      FAIL_FAST_ATTEMPTS,
      `one fast failure per attempt: ${types.join(', ')}`,
    );
    assert.equal(
      types.filter((type) => type === 'fail_retryable').length,
      FAIL_FAST_ATTEMPTS - 1,
      `retryable until the last attempt: ${types.join(', ')}`,
    );
    assert.equal(types.at(-1), 'fail_terminal', types.join(', '));
    assert.ok(!types.includes('step_started'), 'no executor started the step');
    for (const event of transitions.filter((e) => e.type === 'step_failed')) {
      assert.equal(event.data['error'], BREAKER_MESSAGE);
    }
    const [step] = await e2e.handle.sql<{ attempts: number; status: string }[]>`
      select attempts, status from task_steps where task_id = ${failing}::uuid
    `;
    assert.deepEqual(step, { attempts: FAIL_FAST_ATTEMPTS, status: 'failed' });
    const [letter] = await e2e.handle.sql<{ reason: string }[]>`
      select reason from dead_letters where task_id = ${failing}::uuid
    `;
    assert.equal(letter?.reason, 'attempts_exhausted', 'its attempts ran out: a dead letter');

    // The waiting task has spent nothing meanwhile, and says why it waits.
    const { task: queued } = await e2e.client.getTask(waiting);
    assert.equal(queued.status, 'TASK_STATUS_QUEUED');
    assert.match(queued.waiting_for, /circuit breaker of tool:flaky is open/);
    const [waitingStep] = await e2e.handle.sql<{ attempts: number; status: string }[]>`
      select attempts, status from task_steps where task_id = ${waiting}::uuid
    `;
    assert.deepEqual(waitingStep, { attempts: 0, status: 'ready' });
    assert.equal(tool.calls, callsWhileOpen, 'no call reached the tool while the breaker was open');

    // The override is cleared: the waiting task runs and succeeds; the failed one stays failed.
    assert.ok(await clearOverride(e2e.handle.db, override.id));
    await breakerAnnounced('closed');
    await waitForStatus(waiting, 'succeeded');
    assert.equal(tool.calls, callsWhileOpen + 1, 'only the waiting task called the tool');
    assert.equal(await statusOf(failing), 'failed_terminal');

    await assertDatabaseInvariants(e2e.handle, { requireFinal: true });
  });
});

/**
 * The task lifecycle through the API against the real stack: pause and resume of a running task,
 * approvals (approve, reject, timeouts that pause or cancel, racing decisions), retry that keeps
 * succeeded steps, fan-out joined once, and an executor killed in the middle of a step.
 * Steps wait at latches the test releases (lifecycle-task-types.ts).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import { toTimestamp, type Task, type TaskEvent, type TaskStatus as ApiStatus } from '@sluice/api';
import { createBusCatalog, encodeMessage } from '@sluice/bus';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsUrl } from '@sluice/bus/testing';
import { decideTransition, type TaskEvent as CoreEvent, type TaskStatus } from '@sluice/core';
import type { DatabaseHandle } from '@sluice/db';
import type { TaskClient } from '@sluice/sdk/client';
import { replayTaskEvents } from '../support/nats-events.js';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertHistoryInTable, historyEntries } from '../support/history.js';
import { startLatchServer, type LatchServer } from '../support/latch-server.js';
import type { ServiceProcess } from '../support/service-process.js';
import type { Stack } from '../support/stack.js';

const TASK_MODULE = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  'lifecycle-task-types.ts',
);

let e2e: E2eStack;
let handle: DatabaseHandle;
let latch: LatchServer;
let stack: Stack;
let client: TaskClient;
let prefix: string;
/** The executor of `tool:latch` now running (tests kill and replace it). */
let latchExecutor: ServiceProcess | undefined;

before(async () => {
  latch = await startLatchServer();
  // No step of these types calls an LLM: the default endpoint, where nothing answers, will do.
  e2e = await startE2eStack({
    label: 'lifecycle',
    maxConnections: 4,
    resources: ['tool:latch', 'llm'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_TEST_LATCH_URL: latch.baseUrl,
      SLUICE_EXECUTOR_SLOTS: '32',
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_WATCH_RECHECK_MS: '300',
      SLUICE_ACK_WAIT_MS: '2000',
      SLUICE_HEARTBEAT_MS: '200',
    },
  });
  ({ handle, stack, client, prefix } = e2e);
  latchExecutor = stack.executors.get('tool:latch');
});

after(async () => {
  await e2e?.stop();
  await latch?.stop();
});

/** Polls the task until `predicate` holds; returns it. */
async function waitForTask(
  taskId: string,
  predicate: (task: Task) => boolean,
  what: string,
): Promise<Task> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { task } = await client.getTask(taskId);
    if (predicate(task)) return task;
    if (Date.now() > deadline)
      throw new Error(`task ${taskId} never ${what}; it is ${task.status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const isStatus = (status: ApiStatus) => (task: Task) => task.status === status;

/** The task's whole history from the start, checked against the transition table. */
async function checkedHistory(taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 1_000);
  try {
    const { task } = await client.getTask(taskId);
    const last = Number(task.last_event_seq);
    for await (const event of client.watchTask(taskId, 0, controller.signal)) {
      events.push(event);
      if (Number(event.seq) >= last) break;
    }
  } finally {
    clearTimeout(timer);
  }
  assertHistoryInTable(historyEntries(events), `the history of ${taskId}`);
  return events;
}

async function stepRows(taskId: string) {
  return handle.sql<
    { seq: number; name: string; status: string; attempts: number; superseded: boolean }[]
  >`
    select seq, name, status, attempts, superseded from task_steps where task_id = ${taskId} order by seq`;
}

describe('pause and resume', () => {
  it('lets the running step finish, starts nothing more, and continues on resume', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P1',
      input: { label: 'pause' },
    });
    const id = task.task_id;
    await latch.arrived(`${id}:one`);
    const paused = await client.pauseTask(id);
    assert.equal(paused.task.status, 'TASK_STATUS_RUNNING');
    assert.equal(paused.task.pause_requested, true);
    await assert.rejects(client.pauseTask(id), { code: grpcStatus.FAILED_PRECONDITION });
    latch.release(`${id}:one`);
    await waitForTask(id, isStatus('TASK_STATUS_PAUSED'), 'paused');
    assert.equal(
      latch.arrivals.filter((a) => a.key === `${id}:two`).length,
      0,
      'step two did not start',
    );
    const resumed = await client.resumeTask(id);
    assert.ok(['TASK_STATUS_QUEUED', 'TASK_STATUS_RUNNING'].includes(resumed.task.status));
    latch.release(`${id}:two`);
    latch.release(`${id}:three`);
    await waitForTask(id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    const rows = await stepRows(id);
    assert.deepEqual(
      rows.map((r) => [r.name, r.status, r.attempts]),
      [
        ['one', 'succeeded', 1],
        ['two', 'succeeded', 1],
        ['three', 'succeeded', 1],
      ],
    );
    await checkedHistory(id);
  });
});

describe('approval', () => {
  const approvalTask = (timeoutMs: number, onTimeout: 'pause' | 'cancel') =>
    client.createTask({
      type: 'lc-approval',
      priority: 'PRIORITY_P0',
      input: { label: 'v1', timeoutMs, onTimeout },
    });

  it('waits for a person, shows the prompt, and continues once approved', async () => {
    const { task } = await approvalTask(600_000, 'cancel');
    const waiting = await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_WAITING_APPROVAL'),
      'waited for approval',
    );
    assert.equal(waiting.approval?.prompt, 'Ship v1?');
    assert.equal(waiting.approval?.step, 'ask');
    assert.equal(waiting.approval?.on_timeout, 'APPROVAL_TIMEOUT_ACTION_CANCEL');
    assert.equal(waiting.can_cancel, true);
    const approved = await client.approveTask(task.task_id, {
      approved: true,
      comment: 'looks good',
    });
    assert.notEqual(approved.task.status, 'TASK_STATUS_WAITING_APPROVAL');
    assert.equal(approved.task.approval, null);
    const done = await waitForTask(task.task_id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    assert.match(done.output, /"shipped":"v1"/);
    await checkedHistory(task.task_id);
  });

  it('gives one of two racing decisions the win', async () => {
    const { task } = await approvalTask(600_000, 'cancel');
    await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_WAITING_APPROVAL'),
      'waited for approval',
    );
    const results = await Promise.allSettled([
      client.approveTask(task.task_id, { approved: true }),
      client.approveTask(task.task_id, { approved: false, comment: 'no' }),
      client.approveTask(task.task_id, { approved: true }),
    ]);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    for (const r of results) {
      if (r.status === 'rejected')
        assert.equal((r.reason as { code?: number }).code, grpcStatus.FAILED_PRECONDITION);
    }
    await waitForTask(
      task.task_id,
      (t) => ['TASK_STATUS_SUCCEEDED', 'TASK_STATUS_CANCELLED'].includes(t.status),
      'finished',
    );
    await checkedHistory(task.task_id);
  });

  it('is cancelled by a rejection, and a retry asks again', async () => {
    const { task } = await approvalTask(600_000, 'cancel');
    await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_WAITING_APPROVAL'),
      'waited for approval',
    );
    const rejected = await client.approveTask(task.task_id, {
      approved: false,
      comment: 'not yet',
    });
    assert.equal(rejected.task.status, 'TASK_STATUS_CANCELLED');
    const retried = await client.retryTask(task.task_id);
    assert.equal(retried.task.attempt, 2);
    const asked = await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_WAITING_APPROVAL'),
      'asked again',
    );
    assert.equal(asked.approval?.prompt, 'Ship v1?');
    await client.approveTask(task.task_id, { approved: true });
    await waitForTask(task.task_id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    const asks = (await stepRows(task.task_id)).filter((r) => r.name === 'ask');
    assert.equal(asks.length, 1, 'the asking step is not run again');
    await checkedHistory(task.task_id);
  });

  it('pauses at its deadline when the type says so, and a resume asks again', async () => {
    const { task } = await approvalTask(300, 'pause');
    const paused = await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_PAUSED'),
      'paused at the deadline',
    );
    assert.equal(paused.approval?.prompt, 'Ship v1?', 'the approval is still pending');
    const resumed = await client.resumeTask(task.task_id);
    assert.equal(resumed.task.status, 'TASK_STATUS_WAITING_APPROVAL');
    // The new deadline is 300 ms away again: approve at once, or see it pause again.
    const decided = await client
      .approveTask(task.task_id, { approved: true })
      .catch((error: unknown) => error);
    if (decided instanceof Error) {
      await waitForTask(task.task_id, isStatus('TASK_STATUS_PAUSED'), 'paused again');
    } else {
      await waitForTask(task.task_id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    }
    await checkedHistory(task.task_id);
  });

  it('times out once even when the scheduler is killed before the deadline', async () => {
    const { task } = await approvalTask(2_500, 'pause');
    await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_WAITING_APPROVAL'),
      'waited for approval',
    );
    stack.scheduler.kill('SIGKILL');
    await stack.scheduler.exited;
    await stack.startScheduler();
    await waitForTask(task.task_id, isStatus('TASK_STATUS_PAUSED'), 'paused at the deadline');
    const events = await checkedHistory(task.task_id);
    assert.equal(events.filter((e) => e.type === 'approval_timeout').length, 1, 'fired once');
    const [row] = await handle.sql<{ open: number; done: number }[]>`
      select count(*) filter (where done_at is null)::int as open,
             count(*) filter (where done_at is not null)::int as done
      from task_timers where task_id = ${task.task_id}`;
    assert.deepEqual({ ...row }, { open: 0, done: 1 });
  });

  it('is cancelled at its deadline when the type says so', async () => {
    const { task } = await approvalTask(200, 'cancel');
    const cancelled = await waitForTask(
      task.task_id,
      isStatus('TASK_STATUS_CANCELLED'),
      'cancelled at the deadline',
    );
    assert.equal(cancelled.error?.error_class, 'ERROR_CLASS_APPROVAL_TIMEOUT');
    await checkedHistory(task.task_id);
  });
});

describe('cancel racing completion', () => {
  it('has one winner and a valid history', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P1',
      input: { label: 'race' },
    });
    const id = task.task_id;
    latch.release(`${id}:one`);
    latch.release(`${id}:two`);
    await latch.arrived(`${id}:three`);
    const [cancel] = await Promise.allSettled([
      client.cancelTask(id, 'race'),
      Promise.resolve(latch.release(`${id}:three`)),
    ]);
    const final = await waitForTask(
      id,
      (t) => t.status === 'TASK_STATUS_SUCCEEDED' || t.status === 'TASK_STATUS_CANCELLED',
      'finished',
    );
    if (cancel.status === 'rejected') {
      assert.equal((cancel.reason as { code?: number }).code, grpcStatus.FAILED_PRECONDITION);
      assert.equal(final.status, 'TASK_STATUS_SUCCEEDED');
    }
    await checkedHistory(id);
  });
});

describe('retry', () => {
  it('runs the failed step again and never the succeeded ones', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P2',
      input: { label: 'retry' },
    });
    const id = task.task_id;
    latch.release(`${id}:one`);
    latch.fail(`${id}:two`);
    const failed = await waitForTask(id, isStatus('TASK_STATUS_FAILED_TERMINAL'), 'failed');
    assert.ok(failed.error);
    await assert.rejects(client.pauseTask(id), { code: grpcStatus.FAILED_PRECONDITION });
    // Let the second attempt of step two through, then retry.
    const keyOfFirstTry = (await latch.arrived(`${id}:two`))[0]?.idempotencyKey;
    latch.release(`${id}:two`);
    latch.release(`${id}:three`);
    const retried = await client.retryTask(id);
    assert.equal(retried.task.status, 'TASK_STATUS_QUEUED');
    assert.equal(retried.task.attempt, 2);
    assert.equal(retried.task.error, null);
    await waitForTask(id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    assert.equal(
      latch.arrivals.filter((a) => a.key === `${id}:one`).length,
      1,
      'step one ran once',
    );
    const twos = await latch.arrived(`${id}:two`, 2);
    assert.equal(
      twos[1]?.idempotencyKey,
      keyOfFirstTry,
      'the retried step keeps its idempotency key',
    );
    const rows = await stepRows(id);
    assert.deepEqual(
      rows.map((r) => [r.name, r.status, r.superseded]),
      [
        ['one', 'succeeded', false],
        ['two', 'failed', true],
        ['two', 'succeeded', false],
        ['three', 'succeeded', false],
      ],
    );
    await checkedHistory(id);
  });
});

describe('fan-out', () => {
  it('joins 20 branches once, with every output in branch order', async () => {
    const { task } = await client.createTask({
      type: 'lc-fan',
      priority: 'PRIORITY_P1',
      input: { count: 20, latched: false },
    });
    const done = await waitForTask(task.task_id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    const output = JSON.parse(done.output) as { joined: { outputs: Array<{ index: number }> } };
    assert.deepEqual(
      output.joined.outputs.map((o) => o.index),
      Array.from({ length: 20 }, (_, i) => i),
    );
    const rows = await stepRows(task.task_id);
    assert.equal(rows.filter((r) => r.name === 'gather').length, 1, 'one join');
    assert.equal(rows.filter((r) => r.name === 'leaf').length, 20);
    await checkedHistory(task.task_id);
  });
});

describe('an executor killed in the middle of a step', () => {
  it('re-runs only that step, with the same idempotency key, and the task finishes', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P0',
      input: { label: 'kill' },
    });
    const id = task.task_id;
    latch.release(`${id}:one`);
    const [first] = await latch.arrived(`${id}:two`);
    await replaceLatchExecutor();
    const attempts = await latch.arrived(`${id}:two`, 2, 60_000);
    assert.equal(attempts[1]?.idempotencyKey, first?.idempotencyKey, 'same key on both attempts');
    latch.release(`${id}:two`);
    latch.release(`${id}:three`);
    await waitForTask(id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    assert.equal(
      latch.arrivals.filter((a) => a.key === `${id}:one`).length,
      1,
      'step one ran once',
    );
    const rows = await stepRows(id);
    assert.deepEqual(
      rows.map((r) => [r.name, r.status]),
      [
        ['one', 'succeeded'],
        ['two', 'succeeded'],
        ['three', 'succeeded'],
      ],
    );
    assert.equal(rows[0]?.attempts, 1);
    assert.equal(rows[1]?.attempts, 2);
    await checkedHistory(id);
  });
});

/** SIGKILLs the `tool:latch` executor (no clean stop) and starts another one. */
async function replaceLatchExecutor(): Promise<void> {
  assert.ok(latchExecutor, 'a tool:latch executor runs');
  latchExecutor.kill('SIGKILL');
  await latchExecutor.exited;
  latchExecutor = await stack.startExecutor('tool:latch');
}

describe('a fan-out whose executor is killed', () => {
  it('still joins once with all 20 outputs', async () => {
    const { task } = await client.createTask({
      type: 'lc-fan',
      priority: 'PRIORITY_P1',
      input: { count: 20, latched: true },
    });
    const id = task.task_id;
    const running = await waitForTask(id, (t) => /leaf/.test(t.current_step), 'fanned out');
    assert.equal(running.current_step, 'leaf ×20');
    await latch.arrived(`${id}:leaf0`);
    await replaceLatchExecutor();
    for (let index = 0; index < 20; index++) latch.release(`${id}:leaf${index}`);
    const done = await waitForTask(id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    const output = JSON.parse(done.output) as { joined: { outputs: Array<{ index: number }> } };
    assert.deepEqual(
      output.joined.outputs.map((o) => o.index),
      Array.from({ length: 20 }, (_, i) => i),
    );
    const rows = await stepRows(id);
    assert.equal(rows.filter((r) => r.name === 'gather').length, 1, 'one join');
    assert.equal(rows.filter((r) => r.name === 'leaf' && r.status === 'succeeded').length, 20);
    await checkedHistory(id);
  });
});

describe('watching', () => {
  it('a reconnecting watcher sees every event once, in order, as a NATS subscriber does', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P2',
      input: { label: 'watch' },
    });
    const id = task.task_id;
    const seen: TaskEvent[] = [];
    // First connection: follow until step one runs, then drop it.
    const first = new AbortController();
    await latch.arrived(`${id}:one`);
    for await (const event of client.watchTask(id, 0, first.signal)) {
      seen.push(event);
      if (event.type === 'start') first.abort();
    }
    latch.release(`${id}:one`);
    latch.release(`${id}:two`);
    await waitForTask(id, (t) => /three/.test(t.current_step), 'reached step three');
    // Reconnect from the last sequence seen; events recorded meanwhile are replayed.
    const last = Number(seen.at(-1)?.seq ?? 0);
    const rest = client.watchTask(id, last);
    latch.release(`${id}:three`);
    for await (const event of rest) seen.push(event);
    const seqs = seen.map((e) => Number(e.seq));
    assert.deepEqual(
      seqs,
      Array.from({ length: seqs.length }, (_, i) => i + 1),
      'each once, in order',
    );
    assert.equal(seen.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    assert.deepEqual(await natsEventSeqs(id, seqs.length), seqs, 'NATS subscribers see the same');
  });

  it('lists tasks by priority and creation time', async () => {
    const since = new Date();
    const { task } = await client.createTask({
      type: 'lc-fan',
      priority: 'PRIORITY_P3',
      input: { count: 1, latched: false },
    });
    const p3 = await client.listTasks({ priority: 'PRIORITY_P3' });
    assert.ok(p3.tasks.length >= 1);
    assert.ok(p3.tasks.every((t) => t.priority === 'PRIORITY_P3'));
    const recent = await client.listTasks({ created_after: toTimestamp(since) });
    assert.deepEqual(
      recent.tasks.map((t) => t.task_id),
      [task.task_id],
    );
    const none = await client.listTasks({ created_before: toTimestamp(new Date(0)) });
    assert.deepEqual(none.tasks, []);
  });
});

/** The sequences of a task's events in the events stream, read by a consumer made afterwards. */
async function natsEventSeqs(taskId: string, expected: number): Promise<number[]> {
  const notices = await replayTaskEvents({ prefix, tenantId: 'acme', taskId, count: expected });
  return notices.map((notice) => notice.seq);
}

describe('requests the table does not allow', () => {
  type Command = 'cancel' | 'pause' | 'resume' | 'approve' | 'reject' | 'retry';
  const COMMANDS: readonly Command[] = ['cancel', 'pause', 'resume', 'approve', 'reject', 'retry'];
  const EVENT_OF: Record<Command, CoreEvent> = {
    cancel: { type: 'cancel' },
    pause: { type: 'pause' },
    resume: { type: 'resume' },
    approve: { type: 'approve' },
    reject: { type: 'reject' },
    retry: { type: 'retry' },
  };
  const send = (command: Command, id: string) => {
    switch (command) {
      case 'cancel':
        return client.cancelTask(id);
      case 'pause':
        return client.pauseTask(id);
      case 'resume':
        return client.resumeTask(id);
      case 'approve':
        return client.approveTask(id, { approved: true });
      case 'reject':
        return client.approveTask(id, { approved: false });
      case 'retry':
        return client.retryTask(id);
    }
  };

  /** Tasks brought into each state a person can find a task in (through the API only). */
  const inStates = async (): Promise<Record<string, Task>> => {
    const held = () =>
      client.createTask({ type: 'lc-held', priority: 'PRIORITY_P2', input: { label: 'held' } });
    const queued = (await held()).task;
    const paused = (await client.pauseTask((await held()).task.task_id)).task;
    const cancelled = (await client.cancelTask((await held()).task.task_id)).task;
    const linear = (
      await client.createTask({
        type: 'lc-linear',
        priority: 'PRIORITY_P1',
        input: { label: 'run' },
      })
    ).task;
    await latch.arrived(`${linear.task_id}:one`);
    const failing = (
      await client.createTask({
        type: 'lc-linear',
        priority: 'PRIORITY_P1',
        input: { label: 'fail' },
      })
    ).task;
    latch.fail(`${failing.task_id}:one`);
    const approval = (
      await client.createTask({
        type: 'lc-approval',
        priority: 'PRIORITY_P1',
        input: { label: 'matrix', timeoutMs: 600_000, onTimeout: 'cancel' },
      })
    ).task;
    const done = (
      await client.createTask({
        type: 'lc-fan',
        priority: 'PRIORITY_P1',
        input: { count: 1, latched: false },
      })
    ).task;
    return {
      queued,
      paused,
      cancelled,
      running: await waitForTask(linear.task_id, isStatus('TASK_STATUS_RUNNING'), 'running'),
      failed_terminal: await waitForTask(
        failing.task_id,
        isStatus('TASK_STATUS_FAILED_TERMINAL'),
        'failed',
      ),
      waiting_approval: await waitForTask(
        approval.task_id,
        isStatus('TASK_STATUS_WAITING_APPROVAL'),
        'waiting',
      ),
      succeeded: await waitForTask(done.task_id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded'),
    };
  };

  it('answers FAILED_PRECONDITION and changes nothing, in every state', async () => {
    const tasks = await inStates();
    let refusals = 0;
    for (const [state, before] of Object.entries(tasks)) {
      const machine = {
        status: state as TaskStatus,
        cancelRequested: before.cancel_requested,
        pauseRequested: before.pause_requested,
        approvalPending: false,
      };
      for (const command of COMMANDS) {
        if (decideTransition(machine, EVENT_OF[command]).ok) continue;
        refusals++;
        await assert.rejects(
          send(command, before.task_id),
          { code: grpcStatus.FAILED_PRECONDITION },
          `${command} of a ${state} task`,
        );
        const { task: after } = await client.getTask(before.task_id);
        assert.equal(after.status, before.status, `${command} of a ${state} task changed nothing`);
        assert.equal(
          after.last_event_seq,
          before.last_event_seq,
          `${command} of a ${state} task recorded nothing`,
        );
      }
    }
    assert.ok(refusals >= 25, `${refusals} refused pairs checked`);
    // Let the running task finish, so it holds no step of the later tests' resource.
    for (const step of ['one', 'two', 'three']) {
      latch.release(`${tasks['running']?.task_id ?? ''}:${step}`);
    }
  });
});

describe('stale step messages', () => {
  it('are acknowledged and dropped: a recorded step never runs again', async () => {
    const { task } = await client.createTask({
      type: 'lc-linear',
      priority: 'PRIORITY_P1',
      input: { label: 'stale' },
    });
    const id = task.task_id;
    for (const step of ['one', 'two', 'three']) latch.release(`${id}:${step}`);
    await waitForTask(id, isStatus('TASK_STATUS_SUCCEEDED'), 'succeeded');
    const nc = await connect({ servers: natsUrl() });
    try {
      const catalog = createBusCatalog(prefix);
      const subject = catalog.subjects.step('tool:latch', 1);
      // The dispatch of step one again, as a late redelivery or a replay would bring it (a
      // message id of its own, so the stream's duplicate window does not hide it).
      const { seq } = await jetstream(nc).publish(
        subject,
        encodeMessage({
          type: 'step.dispatch',
          task_id: id,
          step_seq: 1,
          dispatch: 1,
          tenant_id: 'acme',
          priority: 1,
          resource: 'tool:latch',
        }),
        { msgID: `${id}:1:1:replayed` },
      );
      // A work queue removes a message once it is acknowledged.
      const stream = await (await jetstreamManager(nc)).streams.get(catalog.streams.steps);
      const deadline = Date.now() + 30_000;
      while ((await stream.getMessage({ seq })) !== null) {
        if (Date.now() > deadline) throw new Error('the stale message was never acknowledged');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await nc.close();
    }
    assert.equal(
      latch.arrivals.filter((a) => a.key === `${id}:one`).length,
      1,
      'step one ran once',
    );
    const rows = await stepRows(id);
    assert.deepEqual(
      rows.map((r) => [r.name, r.status, r.attempts]),
      [
        ['one', 'succeeded', 1],
        ['two', 'succeeded', 1],
        ['three', 'succeeded', 1],
      ],
    );
  });
});

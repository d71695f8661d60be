/**
 * End to end, as a user runs it: the four services as separate processes on the real NATS and
 * Postgres, a real gRPC client, the sample task type calling a fake LLM and a fake web server over
 * HTTP. 200 concurrent creates (50 repeating an idempotency key) give 150 tasks that all succeed,
 * each with a history that is a path in the transition table and each step recorded done once.
 */
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { DatabaseHandle } from '@sluice/db';
import type { TaskClient } from '@sluice/sdk/client';
import { fromTimestamp, type TaskEvent } from '@sluice/api';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import { startFakeWebServer, type FakeWebServer } from '../support/fake-web-server.js';
import { replayTaskEvents } from '../support/nats-events.js';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertHistoryInTable, historyEntries } from '../support/history.js';
import { assertDatabaseInvariants } from '../support/invariants.js';

const DISTINCT_TASKS = 150;
const REPEATS = 50;

let e2e: E2eStack;
let handle: DatabaseHandle;
let llm: FakeLlmServer;
let web: FakeWebServer;
let client: TaskClient;
let prefix: string;

before(async () => {
  llm = await startFakeLlmServer({ apiKey: 'llm-secret' });
  web = await startFakeWebServer({});
  e2e = await startE2eStack({
    label: 'e2e',
    maxConnections: 4,
    llmBaseUrl: llm.baseUrl,
    llmApiKey: 'llm-secret',
    env: {
      SLUICE_SCHEDULER_POLL_MS: '200',
      SLUICE_WATCH_RECHECK_MS: '500',
      SLUICE_LEASE_TTL_MS: '2000',
    },
  });
  ({ handle, client, prefix } = e2e);
});

after(async () => {
  const exits = await e2e?.stop();
  await llm?.stop();
  await web?.stop();
  if (exits)
    assert.deepEqual(
      Object.values(exits),
      exits && Object.values(exits).map(() => 0),
      'every service stops cleanly',
    );
});

function inputOf(i: number) {
  return {
    topic: `topic ${i}`,
    sourceUrl: web.url(i % 2 === 0 ? '/articles/backpressure' : '/articles/priorities'),
  };
}

async function watchToEnd(taskId: string): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const event of client.watchTask(taskId, 0, AbortSignal.timeout(90_000)))
    events.push(event);
  return events;
}

describe('a multi-step task end to end', () => {
  it('runs 150 distinct tasks from 200 concurrent creates to succeeded, each step once', async () => {
    const requests = [
      ...Array.from({ length: DISTINCT_TASKS }, (_, i) => i),
      ...Array.from({ length: REPEATS }, (_, i) => i),
    ];
    const responses = await Promise.all(
      requests.map((i) =>
        client.createTask({
          type: 'research-brief',
          priority:
            (['PRIORITY_P0', 'PRIORITY_P1', 'PRIORITY_P2', 'PRIORITY_P3'] as const)[i % 4] ??
            'PRIORITY_P2',
          input: inputOf(i),
          idempotencyKey: `order-${i}`,
        }),
      ),
    );
    const idsByKey = new Map<number, Set<string>>();
    requests.forEach((i, n) => {
      const set = idsByKey.get(i) ?? new Set<string>();
      set.add(responses[n]?.task.task_id ?? '');
      idsByKey.set(i, set);
    });
    assert.ok(
      [...idsByKey.values()].every((ids) => ids.size === 1),
      'one task per idempotency key',
    );
    const taskIds = [...new Set(responses.map((r) => r.task.task_id))];
    assert.equal(taskIds.length, DISTINCT_TASKS);
    assert.equal(responses.filter((r) => r.created).length, DISTINCT_TASKS);

    const histories = await Promise.all(taskIds.map(watchToEnd));
    for (const [n, events] of histories.entries()) {
      const taskId = taskIds[n];
      assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED', `task ${taskId} succeeded`);
      assert.deepEqual(
        events.map((e) => Number(e.seq)),
        events.map((_, i) => i + 1),
        'events arrive once each, in sequence, from 1',
      );
      assertHistoryInTable(historyEntries(events), `the history of ${taskId}`);
    }

    const steps = await handle.sql`
      select task_id, seq, name, status, attempts, dispatch_count from task_steps order by task_id, seq`;
    assert.equal(steps.length, DISTINCT_TASKS * 2, 'two steps per task, no more');
    for (const step of steps) {
      assert.equal(step['status'], 'succeeded');
      assert.equal(step['attempts'], 1, `step ${step['name']} of ${step['task_id']} ran once`);
    }
    const got = await client.getTask(taskIds[0] ?? '');
    assert.equal(got.task.status, 'TASK_STATUS_SUCCEEDED');
    assert.equal(got.task.attempt, 1);
    assert.match(got.task.trace_id, /^[0-9a-f]{32}$/);
    const output = JSON.parse(got.task.output) as { outline: string; source: { status: number } };
    assert.match(output.outline, /^Summary: /, 'the outline came from the LLM endpoint');
    assert.equal(output.source.status, 200);
    assert.equal(llm.requests.length, DISTINCT_TASKS, 'one LLM call per task');
    assert.ok(llm.requests.every((r) => r.headers['authorization'] === 'Bearer llm-secret'));
    await assertDatabaseInvariants(handle, { tenantId: 'acme', requireFinal: true });
  });

  it('replays a finished task’s events after the sequence the client saw', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P0',
      input: inputOf(1),
    });
    const all = await watchToEnd(task.task_id);
    const rest: TaskEvent[] = [];
    for await (const event of client.watchTask(task.task_id, 2)) rest.push(event);
    assert.deepEqual(rest, all.slice(2));
  });

  it('relays every event to the task’s NATS subject in order, for late subscribers too', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P2',
      input: inputOf(4),
    });
    const events = await watchToEnd(task.task_id);
    // A consumer created after the fact replays what the relay stored in the stream.
    const notices = await replayTaskEvents({
      prefix,
      tenantId: 'acme',
      taskId: task.task_id,
      count: events.length,
    });
    assert.ok(notices.every((notice) => notice.task_id === task.task_id));
    assert.deepEqual(
      notices.map((notice) => notice.seq),
      events.map((e) => Number(e.seq)),
    );
  });

  it('cancels a queued or running task and refuses to cancel a finished one', async () => {
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P3',
      input: inputOf(2),
    });
    const cancelled = await client
      .cancelTask(task.task_id, 'changed my mind')
      .catch((error: unknown) => error);
    const events = await watchToEnd(task.task_id);
    const final = events.at(-1)?.to_status;
    if (cancelled instanceof Error) {
      // It finished before the cancel arrived: then the cancel must have been refused.
      assert.equal((cancelled as { code?: number }).code, grpcStatus.FAILED_PRECONDITION);
      assert.equal(final, 'TASK_STATUS_SUCCEEDED');
    } else {
      assert.ok(
        final === 'TASK_STATUS_CANCELLED' || final === 'TASK_STATUS_SUCCEEDED',
        `ended ${final}`,
      );
    }
    await assert.rejects(client.cancelTask(task.task_id), { code: grpcStatus.FAILED_PRECONDITION });
  });

  it('fails a task whose step fails for good, and shows the error class and message', async () => {
    llm.failNext({ status: 401 });
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P1',
      input: inputOf(3),
    });
    const events = await watchToEnd(task.task_id);
    assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_FAILED_TERMINAL');
    const { task: failed } = await client.getTask(task.task_id);
    assert.equal(failed.error?.error_class, 'ERROR_CLASS_PERMISSION_DENIED');
    assert.equal(failed.error?.retryable, false);
    assert.match(failed.error?.message ?? '', /401/);
    assert.ok(failed.finish_time, 'a failed task has a finish time');
  });

  it('retries a step that failed with a 5xx after a backoff, on the same step and key', async () => {
    llm.failNext({ status: 503 }, { status: 500 });
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P1',
      input: inputOf(5),
    });
    const events = await watchToEnd(task.task_id);
    assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    const waits = events.filter((e) => e.type === 'fail_retryable');
    assert.equal(waits.length, 2, 'two failures, each waited out');
    for (const wait of waits) {
      assert.equal(wait.to_status, 'TASK_STATUS_FAILED_RETRYABLE');
      const data = JSON.parse(wait.data) as { error_class: string; next_attempt_at: string };
      assert.equal(data.error_class, 'external_5xx');
      const failedAt = wait.create_time ? fromTimestamp(wait.create_time).getTime() : Infinity;
      assert.ok(
        Date.parse(data.next_attempt_at) >= failedAt,
        'the next attempt is after the failure',
      );
    }
    assert.equal(events.filter((e) => e.type === 'backoff_due').length, 2);
    const steps = await handle.sql<{ name: string; attempts: number; status: string }[]>`
      select name, attempts, status from task_steps where task_id = ${task.task_id} order by seq`;
    assert.deepEqual(
      steps.map((s) => [s.name, s.attempts, s.status]),
      [
        ['outline', 3, 'succeeded'],
        ['fetchSource', 1, 'succeeded'],
      ],
      'the same step row ran three times',
    );
  });

  it('fails for good once a step’s attempts run out', async () => {
    llm.failNext({ status: 500 }, { status: 500 }, { status: 500 });
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P1',
      input: inputOf(6),
    });
    const events = await watchToEnd(task.task_id);
    const last = events.at(-1);
    assert.equal(last?.type, 'fail_terminal');
    const data = JSON.parse(last?.data ?? '{}') as { dead_letter_id?: string };
    assert.match(data.dead_letter_id ?? '', /^[0-9a-f-]{36}$/, 'names its dead letter');
    assert.deepEqual(
      { ...data, dead_letter_id: undefined },
      {
        error_class: 'external_5xx',
        message:
          'the LLM endpoint answered HTTP 500: The server had an error while processing your request (injected).',
        attempts: 3,
        reason: 'dead_letter',
        dead_letter_id: undefined,
        dead_letter_reason: 'attempts_exhausted',
      },
    );
    assert.equal(events.filter((e) => e.type === 'fail_retryable').length, 2);
  });

  it('creates exactly 10 tasks from 1,000 concurrent creates sharing 10 idempotency keys', async () => {
    const KEYS = 10;
    const responses = await Promise.all(
      Array.from({ length: 1_000 }, (_, n) =>
        client.createTask({
          type: 'research-brief',
          priority: 'PRIORITY_P1',
          input: inputOf(n % KEYS),
          idempotencyKey: `shared-${n % KEYS}`,
        }),
      ),
    );
    const idsByKey = new Map<number, Set<string>>();
    responses.forEach((response, n) => {
      const ids = idsByKey.get(n % KEYS) ?? new Set<string>();
      ids.add(response.task.task_id);
      idsByKey.set(n % KEYS, ids);
    });
    assert.deepEqual(
      [...idsByKey.values()].map((ids) => ids.size),
      Array.from({ length: KEYS }, () => 1),
      'every create of a key answered with the same task',
    );
    assert.equal(responses.filter((r) => r.created).length, KEYS, 'one create per key created');
    const [rows] = await handle.sql<{ count: number }[]>`
      select count(*)::int as count from tasks where idempotency_key like 'shared-%'`;
    assert.equal(rows?.count, KEYS);
    const taskIds = [...idsByKey.values()].flatMap((ids) => [...ids]);
    for (const events of await Promise.all(taskIds.map(watchToEnd))) {
      assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    }
    await assertDatabaseInvariants(handle, { tenantId: 'acme' });
  });

  it('aborts the running step of a cancelled task through its signal', async () => {
    const held: ServerResponse[] = [];
    let aborted = false;
    const hanging = createServer((request, response) => {
      held.push(response);
      request.on('close', () => (aborted = true));
    });
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = hanging.address() as AddressInfo;
      const { task } = await client.createTask({
        type: 'research-brief',
        priority: 'PRIORITY_P0',
        input: { topic: 'slow source', sourceUrl: `http://127.0.0.1:${port}/slow` },
      });
      await waitFor(() => held.length > 0, 'the fetch step reached the slow source');
      const { task: requested } = await client.cancelTask(task.task_id, 'too slow');
      assert.equal(requested.status, 'TASK_STATUS_RUNNING');
      assert.equal(requested.cancel_requested, true);
      const events = await watchToEnd(task.task_id);
      assert.deepEqual(
        events.filter((e) => e.type.startsWith('cancel')).map((e) => [e.type, e.to_status]),
        [
          ['cancel', 'TASK_STATUS_RUNNING'],
          ['cancel_completed', 'TASK_STATUS_CANCELLED'],
        ],
      );
      await waitFor(() => aborted, 'the step’s HTTP call was aborted');
    } finally {
      for (const response of held) response.destroy();
      await new Promise((resolve) => hanging.close(resolve));
    }
  });
});

async function waitFor(condition: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

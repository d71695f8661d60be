/**
 * `CreateTasks` against the machine's real NATS and Postgres: a batch is created in order, all or
 * none; its entries' keys behave as `CreateTask`'s; whatever is wrong with one entry (named by its
 * index), with the batch itself, or with the moment (shedding) writes and publishes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import type { Msg } from '@nats-io/transport-node';
import {
  AdmissionLevel,
  closeNats,
  connectNats,
  encodeDecision,
  normalDecision,
} from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import type { CreateTaskParams, TaskClient } from '@sluice/sdk/client';
import {
  decodeStatusDetails,
  STATUS_DETAILS_TRAILER,
} from '../../services/gateway/src/grpc/status-details.js';
import {
  bearer,
  expectInvalidField,
  expectStatus,
  startGatewayFixture,
  type GatewayFixture,
  type RawTaskClient,
} from '../support/gateway-fixture.js';

const TYPE = 'research-brief';

let fx: GatewayFixture;
let apiKey: string;
let client: TaskClient;
let raw: RawTaskClient;

before(async () => {
  fx = await startGatewayFixture('create_tasks');
  apiKey = await fx.tenantWithKey('acme');
  client = fx.client(apiKey);
  raw = fx.raw();
});

after(async () => {
  await fx?.stop();
});

/** A valid entry about `topic`, with some fields replaced. */
function entry(topic: string, overrides: Partial<CreateTaskParams> = {}): CreateTaskParams {
  return {
    type: TYPE,
    priority: 'PRIORITY_P2',
    input: { topic, sourceUrl: `https://example.com/${topic}` },
    ...overrides,
  };
}

describe('CreateTasks', () => {
  it('creates every task in the order given, each queued with its own input and priority', async () => {
    const batch = [
      entry('one', { priority: 'PRIORITY_P1' }),
      entry('two'),
      entry('three', { priority: 'PRIORITY_P3', idempotencyKey: 'three' }),
    ];
    const before = await fx.rowCounts();
    const results = await client.createTasks(batch);
    assert.equal(results.length, 3);
    for (const [index, result] of results.entries()) {
      assert.equal(result.created, true);
      assert.equal(result.task.status, 'TASK_STATUS_QUEUED');
      assert.equal(result.task.priority, batch[index]?.priority);
      assert.deepEqual(JSON.parse(result.task.input), batch[index]?.input);
      const { task } = await client.getTask(result.task.task_id);
      assert.equal(task.input, result.task.input);
    }
    assert.equal(new Set(results.map((r) => r.task.task_id)).size, 3);
    assert.deepEqual(await fx.rowCounts(), {
      tasks: before.tasks + 3,
      task_steps: before.task_steps + 3,
      task_events: before.task_events + 3,
    });
  });

  it('wakes admission once per first step resource and priority of the created tasks', async () => {
    const nc = await connectNats({ url: natsUrl(), name: 'create-tasks-wake' });
    try {
      const wakes: Msg[] = [];
      const subscription = nc.subscribe(fx.catalog.subjects.wake('dispatch'), {
        callback: (error, message) => {
          if (!error) wakes.push(message);
        },
      });
      await nc.flush();
      await client.createTasks([
        entry('w1', { priority: 'PRIORITY_P1' }),
        entry('w2', { priority: 'PRIORITY_P1' }),
        entry('w3', { priority: 'PRIORITY_P2' }),
      ]);
      // A single create after the batch: its wake-up arrives after the batch's (one connection).
      await client.createTask(entry('w4', { priority: 'PRIORITY_P0' }));
      const deadline = Date.now() + 10_000;
      while (
        !wakes.some((m) => (m.json<{ step?: { priority: number } }>().step?.priority ?? -1) === 0)
      ) {
        assert.ok(Date.now() < deadline, 'the single create’s wake-up arrives');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      subscription.unsubscribe();
      const steps = wakes.map(
        (m) => m.json<{ step?: { resource: string; priority: number } }>().step,
      );
      assert.deepEqual(
        steps.map((s) => s?.priority).sort(),
        [0, 1, 2],
        'one wake-up per (resource, priority) of the batch, then the single create’s',
      );
    } finally {
      await closeNats(nc);
    }
  });

  it('answers repeated keys with the existing tasks; the same batch again writes nothing', async () => {
    const batch = [entry('k1', { idempotencyKey: 'k-1' }), entry('k2', { idempotencyKey: 'k-2' })];
    const first = await client.createTasks(batch);
    assert.deepEqual(
      first.map((r) => r.created),
      [true, true],
    );
    await fx.expectNoEffect(async () => {
      const again = await client.createTasks(batch);
      assert.deepEqual(
        again.map((r) => [r.created, r.task.task_id]),
        first.map((r) => [false, r.task.task_id]),
      );
    });
    // A key already used by CreateTask, in a batch with a new entry.
    const single = await client.createTask(entry('k3', { idempotencyKey: 'k-3' }));
    const mixed = await client.createTasks([
      entry('k4', { idempotencyKey: 'k-4' }),
      entry('k3', { idempotencyKey: 'k-3' }),
    ]);
    assert.deepEqual(
      mixed.map((r) => r.created),
      [true, false],
    );
    assert.equal(mixed[1]?.task.task_id, single.task.task_id);
  });

  it('refuses the whole batch with ALREADY_EXISTS when one key was used for another input', async () => {
    await client.createTask(entry('taken', { idempotencyKey: 'taken' }));
    await fx.expectNoEffect(async () => {
      const error = await expectStatus(
        client.createTasks([entry('fresh'), entry('other', { idempotencyKey: 'taken' })]),
        status.ALREADY_EXISTS,
      );
      assert.match(error.details, /idempotency key "taken"/);
    });
  });
});

describe('CreateTasks refuses bad input: INVALID_ARGUMENT naming the entry, nothing written', () => {
  const cases: [string, string, CreateTaskParams[]][] = [
    ['an unknown type in the first entry', 'tasks[0].type', [entry('a', { type: 'no-such-type' })]],
    [
      'a bad priority in the second entry',
      'tasks[1].priority',
      [entry('a'), entry('b', { priority: 'PRIORITY_UNSPECIFIED' })],
    ],
    [
      'an input that does not match the schema',
      'tasks[2].input.topic',
      [entry('a'), entry('b'), entry('c', { input: { sourceUrl: 'https://example.com/c' } })],
    ],
    ['an input that is not JSON', 'tasks[1].input', [entry('a'), entry('b', { input: '{' })]],
    [
      'an input holding an unpaired surrogate',
      'tasks[1].input',
      [
        entry('a'),
        entry('b', { input: '{"topic":"\\ud800","sourceUrl":"https://example.com/b"}' }),
      ],
    ],
    [
      'a key used twice in the batch',
      'tasks[2].idempotency_key',
      [
        entry('a', { idempotencyKey: 'twice' }),
        entry('b'),
        entry('c', { idempotencyKey: 'twice' }),
      ],
    ],
    ['an empty batch', 'tasks', []],
    ['more than 500 entries', 'tasks', Array.from({ length: 501 }, (_, i) => entry(`t${i}`))],
  ];
  for (const [what, field, batch] of cases) {
    it(`${what} → ${field}`, async () => {
      await fx.expectNoEffect(async () => {
        await expectInvalidField(client.createTasks(batch), field);
      });
    });
  }

  it('names the other entry of a repeated key', async () => {
    const message = await expectInvalidField(
      client.createTasks([
        entry('a', { idempotencyKey: 'x' }),
        entry('b', { idempotencyKey: 'x' }),
      ]),
      'tasks[1].idempotency_key',
    );
    assert.match(message, /tasks\[0\]/);
  });

  it('refuses a call without an API key with UNAUTHENTICATED', async () => {
    await fx.expectNoEffect(async () => {
      await expectStatus(
        raw.unary('CreateTasks', { tasks: [{ type: TYPE }] }),
        status.UNAUTHENTICATED,
      );
      await expectStatus(
        raw.unary('CreateTasks', { tasks: [] }, bearer('not-a-key')),
        status.UNAUTHENTICATED,
      );
    });
  });
});

describe('CreateTasks under shedding', () => {
  it('refuses a batch holding a rejected priority with RESOURCE_EXHAUSTED and a retry delay', async () => {
    const nc = await connectNats({ url: natsUrl(), name: 'create-tasks-governor' });
    // Each decision with a newer epoch than any before, as a re-elected governor's would be.
    let epoch = 1_000_000;
    const publish = (reject: (0 | 1 | 2 | 3)[]) =>
      nc.publish(
        fx.catalog.subjects.governorDecisions,
        encodeDecision({
          ...normalDecision(++epoch, 'test-governor'),
          level: reject.length > 0 ? AdmissionLevel.Reject : AdmissionLevel.Normal,
          reject,
          reasons: reject.length > 0 ? ['queue depth (test)'] : [],
          retry_after_ms: reject.length > 0 ? 2_500 : 0,
        }),
      );
    try {
      // P2, not P3: the no-effect probe's own barrier tasks are P3.
      publish([2]);
      // The gateway sees the decision asynchronously: a keyed P3 probe is created at most once.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const refused = await client
          .createTask(entry('probe', { priority: 'PRIORITY_P2', idempotencyKey: 'shed-probe' }))
          .then(
            () => false,
            () => true,
          );
        if (refused) break;
        assert.ok(Date.now() < deadline, 'the gateway starts shedding P2');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await fx.expectNoEffect(async () => {
        const error = await expectStatus(
          client.createTasks([
            entry('p1', { priority: 'PRIORITY_P1' }),
            entry('p2', { priority: 'PRIORITY_P2' }),
          ]),
          status.RESOURCE_EXHAUSTED,
        );
        assert.match(error.details, /shedding P2/);
        const [bytes] = error.metadata.get(STATUS_DETAILS_TRAILER);
        assert.ok(Buffer.isBuffer(bytes));
        assert.equal(decodeStatusDetails(bytes).retryDelayMs, 2_500);
      });
      // A batch without the rejected priority is taken.
      const taken = await client.createTasks([
        entry('p1-taken', { priority: 'PRIORITY_P1' }),
        entry('p3-taken', { priority: 'PRIORITY_P3' }),
      ]);
      assert.deepEqual(
        taken.map((r) => r.created),
        [true, true],
      );
    } finally {
      publish([]);
      await closeNats(nc);
    }
  });
});

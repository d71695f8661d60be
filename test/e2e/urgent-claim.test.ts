/**
 * The urgent claim through the real gateway, NATS and Postgres, with no scheduler running: a create
 * of P0 work publishes its first step itself (the step `dispatched`, its stream sequence recorded,
 * the message on the resource's P0 subject, in the task's trace); lower priorities, an open breaker
 * the governor reports, and `SLUICE_URGENT_CLAIM=off` leave the step ready for the scheduler.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, encodeDecision, normalDecision } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import type { CreateTaskParams, TaskClient } from '@sluice/sdk/client';
import { startGatewayFixture, type GatewayFixture } from '../support/gateway-fixture.js';

const TYPE = 'research-brief';
/** The resource of the research brief's first step. */
const FIRST_RESOURCE = 'llm';

function entry(topic: string, priority: CreateTaskParams['priority']): CreateTaskParams {
  return { type: TYPE, priority, input: { topic, sourceUrl: `https://example.com/${topic}` } };
}

/** A task's first step as Postgres has it. */
async function firstStep(fx: GatewayFixture, taskId: string) {
  const [row] = await fx.database.sql<
    { status: string; dispatch: number; publish_seq: string | null }[]
  >`select status, dispatch_count as dispatch, publish_seq from task_steps where task_id = ${taskId} and seq = 1`;
  assert.ok(row, `task ${taskId} has a first step`);
  return row;
}

/** The dispatch message stored at `seq` in the fixture's STEPS stream. */
async function storedDispatch(fx: GatewayFixture, jsm: JetStreamManager, seq: number) {
  const message = await jsm.streams.getMessage(fx.catalog.streams.steps, { seq });
  assert.ok(message, `a message at sequence ${seq}`);
  return {
    subject: message.subject,
    body: message.json<{ type: string; task_id: string; dispatch: number }>(),
    traceparent: message.header.get('traceparent'),
  };
}

describe('the urgent claim (SLUICE_URGENT_CLAIM=on, the default)', () => {
  let fx: GatewayFixture;
  let client: TaskClient;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  before(async () => {
    fx = await startGatewayFixture('urgent_claim');
    client = fx.client(await fx.tenantWithKey('acme'));
    nc = await connectNats({ url: natsUrl(), name: 'urgent-claim-test' });
    jsm = await jetstreamManager(nc);
  });

  after(async () => {
    if (nc) await closeNats(nc);
    await fx?.stop();
  });

  it('publishes the first step of a P0 task before CreateTask answers', async () => {
    const { task } = await client.createTask(entry('urgent', 'PRIORITY_P0'));
    const step = await firstStep(fx, task.task_id);
    assert.equal(step.status, 'dispatched');
    assert.equal(step.dispatch, 1);
    assert.ok(step.publish_seq !== null, 'the stream sequence is recorded for the reconciler');
    const stored = await storedDispatch(fx, jsm, Number(step.publish_seq));
    assert.equal(stored.subject, fx.catalog.subjects.step(FIRST_RESOURCE, 0));
    assert.deepEqual(
      [stored.body.type, stored.body.task_id, stored.body.dispatch],
      ['step.dispatch', task.task_id, 1],
    );
    assert.match(
      stored.traceparent,
      new RegExp(`^00-${task.trace_id}-[0-9a-f]{16}-0[01]$`),
      "the message continues the task's trace",
    );
  });

  it('tells the scheduler which created steps it dispatched itself', async () => {
    const wakes: unknown[] = [];
    const subscription = nc.subscribe(fx.catalog.subjects.wake('dispatch'), {
      callback: (error, message) => {
        if (!error) wakes.push(message.json<{ step?: unknown }>().step);
      },
    });
    try {
      await nc.flush();
      await client.createTask(entry('told-p0', 'PRIORITY_P0'));
      await client.createTask(entry('told-p1', 'PRIORITY_P1'));
      // The P1 create's wake-up comes last (one connection); a late one of an earlier test before.
      const deadline = Date.now() + 10_000;
      while (!wakes.some((step) => (step as { priority?: number }).priority === 1)) {
        assert.ok(Date.now() < deadline, 'both wake-ups arrive');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      assert.deepEqual(wakes.slice(-2), [
        { resource: FIRST_RESOURCE, priority: 0, dispatched: true },
        { resource: FIRST_RESOURCE, priority: 1 },
      ]);
    } finally {
      subscription.unsubscribe();
    }
  });

  it('leaves a P1 task to the scheduler', async () => {
    const { task } = await client.createTask(entry('lower', 'PRIORITY_P1'));
    assert.deepEqual(await firstStep(fx, task.task_id), {
      status: 'ready',
      dispatch: 0,
      publish_seq: null,
    });
  });

  it('publishes the P0 entries of a CreateTasks batch, and only those', async () => {
    const results = await client.createTasks([
      entry('b0', 'PRIORITY_P0'),
      entry('b1', 'PRIORITY_P3'),
      entry('b2', 'PRIORITY_P0'),
    ]);
    const statuses = await Promise.all(
      results.map(async (result) => (await firstStep(fx, result.task.task_id)).status),
    );
    assert.deepEqual(statuses, ['dispatched', 'ready', 'dispatched']);
  });

  it("claims nothing on a resource whose breaker the governor's decision shows open", async () => {
    let epoch = 1_000;
    const decide = (breakers: Record<string, 'open'>) =>
      nc.publish(
        fx.catalog.subjects.governorDecisions,
        encodeDecision({ ...normalDecision(++epoch, 'test-governor'), breakers }),
      );
    try {
      decide({ [FIRST_RESOURCE]: 'open' });
      // The gateway sees a decision asynchronously: creates until one is left ready.
      const deadline = Date.now() + 10_000;
      for (let n = 0; ; n++) {
        const { task } = await client.createTask(entry(`breaker-${n}`, 'PRIORITY_P0'));
        if ((await firstStep(fx, task.task_id)).status === 'ready') break;
        assert.ok(Date.now() < deadline, 'the gateway applies the open breaker');
      }
    } finally {
      decide({});
    }
    // Once closed, each P0 create claims a step again: the oldest ready P0 step first, which is
    // the one the open breaker left behind.
    const dispatched = async () => {
      const [row] = await fx.database.sql<{ n: number }[]>`
        select count(*)::int as n from task_steps where status = 'dispatched'`;
      return row?.n ?? 0;
    };
    const deadline = Date.now() + 10_000;
    for (let n = 0; ; n++) {
      const before = await dispatched();
      await client.createTask(entry(`closed-${n}`, 'PRIORITY_P0'));
      if ((await dispatched()) > before) break;
      assert.ok(Date.now() < deadline, 'the gateway claims again once the breaker closed');
    }
  });
});

describe('SLUICE_URGENT_CLAIM=off', () => {
  let fx: GatewayFixture;

  before(async () => {
    fx = await startGatewayFixture('urgent_claim_off', { env: { SLUICE_URGENT_CLAIM: 'off' } });
  });

  after(async () => {
    await fx?.stop();
  });

  it('leaves a P0 task to the scheduler', async () => {
    const client = fx.client(await fx.tenantWithKey('acme'));
    const { task } = await client.createTask(entry('urgent', 'PRIORITY_P0'));
    assert.equal((await firstStep(fx, task.task_id)).status, 'ready');
  });
});

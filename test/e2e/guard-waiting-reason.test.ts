/**
 * `GetTask.waiting_for` names the urgent-wait guard when a scheduler holds or caps the lower
 * priorities of a queued task's resource: on a gateway running in this process against the
 * machine's real NATS and Postgres (no scheduler runs, so the task stays queued; the test sends the
 * guard caps notices a scheduler would), the reason appears with a hold (in `sluice get` too),
 * changes with a cap, and goes when the scheduler lifts its caps.
 */
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { NatsConnection } from '@nats-io/transport-node';
import { closeNats, connectNats, encodeGuardCaps } from '@sluice/bus';
import { natsUrl } from '@sluice/bus/testing';
import type { TaskClient } from '@sluice/sdk/client';
import { runCli } from '../../packages/cli/src/main.js';
import { startGatewayFixture, type GatewayFixture } from '../support/gateway-fixture.js';

let fx: GatewayFixture;
let nc: NatsConnection;
let client: TaskClient;
let apiKey: string;

before(async () => {
  fx = await startGatewayFixture('guard_reason');
  nc = await connectNats({ url: natsUrl(), name: 'guard-waiting-reason-test' });
  apiKey = await fx.tenantWithKey('acme');
  client = fx.client(apiKey);
});

/** `sluice get <id>` in this process against the fixture's gateway: its output. */
async function sluiceGet(taskId: string): Promise<string> {
  const out: string[] = [];
  const code = await runCli(['get', taskId], {
    env: { SLUICE_ADDRESS: fx.address, SLUICE_API_KEY: apiKey },
    output: { out: (line) => out.push(line), err: (line) => out.push(line) },
    signal: new AbortController().signal,
  });
  assert.equal(code, 0, out.join('\n'));
  return out.join('\n');
}

after(async () => {
  if (nc) await closeNats(nc);
  await fx?.stop();
});

/** Polls GetTask until its `waiting_for` matches (notices reach the gateway asynchronously). */
async function waitingForUntil(taskId: string, expected: RegExp): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { task } = await client.getTask(taskId);
    if (expected.test(task.waiting_for)) return task.waiting_for;
    if (Date.now() > deadline) {
      assert.fail(`waiting_for stayed "${task.waiting_for}", expected ${String(expected)}`);
    }
    await delay(20);
  }
}

describe('GetTask names the urgent-wait guard', () => {
  it('while a scheduler holds or caps lower priorities on the resource of the next step', async (t) => {
    // research-brief's first step runs on llm.
    const { task } = await client.createTask({
      type: 'research-brief',
      priority: 'PRIORITY_P3',
      input: { topic: 'guard', sourceUrl: 'https://example.com/guard' },
    });
    assert.equal(task.status, 'TASK_STATUS_QUEUED');
    assert.equal(task.waiting_for, '', 'nothing holds it back but its turn');
    // As a scheduler does while it caps (every reading), so a slow poll never finds them stale.
    let announcing: NodeJS.Timeout | undefined;
    const send = (caps: Record<string, number>) => {
      clearInterval(announcing);
      const notice = encodeGuardCaps({ scheduler_id: 's-1', caps });
      nc.publish(fx.catalog.subjects.guardCaps, notice);
      announcing = setInterval(() => nc.publish(fx.catalog.subjects.guardCaps, notice), 250);
    };
    t.after(() => clearInterval(announcing));

    send({ llm: 0 });
    assert.equal(
      await waitingForUntil(task.task_id, /held/),
      'P0 steps on llm wait longer than their target: lower priorities are held there until they catch up',
    );
    // And `sluice get` says so.
    assert.match(
      await sluiceGet(task.task_id),
      /^waiting +P0 steps on llm wait longer than their target/m,
    );

    // Another resource's cap does not concern it; a cap of its own does.
    send({ 'tool:http': 0, llm: 3 });
    assert.match(
      await waitingForUntil(task.task_id, /only/),
      /lower priorities may have only 3 steps in flight there/,
    );

    send({});
    await waitingForUntil(task.task_id, /^$/);
  });
});

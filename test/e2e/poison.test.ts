/**
 * A poison message in the whole stack: a step whose handler crashes its executor every time. The
 * executor is restarted after each crash; JetStream delivers the message `SLUICE_MAX_DELIVER` (2)
 * times, then publishes its MAX_DELIVERIES advisory when the next executor pulls, and the
 * scheduler's advisory worker turns it into exactly one dead letter and a failed task, deleting the
 * message from the steps stream.
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
import { assertDatabaseInvariants } from '../support/invariants.js';

const TASK_MODULE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'poison-task-types.ts');
const RESOURCE = 'tool:poison';
/** Executors started at most (two crash, the third pulls after the last delivery and lives). */
const MAX_EXECUTORS = 6;

let e2e: E2eStack;

before(async () => {
  e2e = await startE2eStack({
    label: 'poison',
    resources: [RESOURCE],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_MAX_DELIVER: '2',
      SLUICE_ACK_WAIT_MS: '1000',
    },
  });
});

after(async () => {
  await e2e?.stop();
});

interface LetterRow {
  id: string;
  reason: string;
  attempts: number;
  stream_seq: number | null;
}

async function lettersOf(taskId: string): Promise<LetterRow[]> {
  return e2e.handle.sql<LetterRow[]>`
    select id, reason, attempts, stream_seq::int as stream_seq from dead_letters where task_id = ${taskId}`;
}

describe('poison message', () => {
  it('ends in dead letters through the advisory path when it crashes its executor', async () => {
    const { client, stack, prefix } = e2e;
    const { task } = await client.createTask({
      type: 'poison-crash',
      priority: 'PRIORITY_P1',
      input: {},
    });

    let executor = stack.executors.get(RESOURCE);
    assert.ok(executor, 'a tool:poison executor runs');
    let started = 1;
    let crashes = 0;
    const deadline = Date.now() + 60_000;
    for (;;) {
      // Each executor that pulls the message dies on it; the one that pulls after the last
      // delivery makes the server publish the advisory (and stays alive).
      const exit: { code: number | null } | undefined = await Promise.race([
        executor.exited,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 250)),
      ]);
      const letters = await lettersOf(task.task_id);
      if (letters.length > 0) break;
      if (Date.now() > deadline) assert.fail('no dead letter within 60 s');
      if (exit !== undefined) {
        assert.equal(exit.code, 1, 'the executor crashed on the step');
        crashes += 1;
        assert.ok(started < MAX_EXECUTORS, `the message was delivered more than ${started} times`);
        executor = await stack.startExecutor(RESOURCE);
        started += 1;
      }
    }

    const taskDeadline = Date.now() + 30_000;
    for (;;) {
      const { task: current } = await client.getTask(task.task_id);
      if (current.status === 'TASK_STATUS_FAILED_TERMINAL') break;
      if (Date.now() > taskDeadline) assert.fail(`task still ${current.status} after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    const letters = await lettersOf(task.task_id);
    assert.equal(letters.length, 1, 'exactly one dead letter');
    const [letter] = letters;
    assert.ok(letter);
    assert.equal(letter.reason, 'max_deliveries');
    assert.equal(letter.attempts, 2);
    assert.ok(letter.stream_seq !== null, 'the letter names the message');
    // The task fails like one whose attempts ran out: reason dead_letter, naming the letter.
    const [failed] = await e2e.handle.sql<{ data: Record<string, unknown> }[]>`
      select data from task_events where task_id = ${task.task_id} and type = 'fail_terminal'`;
    assert.equal(failed?.data['reason'], 'dead_letter');
    assert.equal(failed?.data['dead_letter_reason'], 'max_deliveries');
    assert.equal(failed?.data['dead_letter_id'], letter.id);
    // Usually both deliveries crash an executor; when the second arrives a moment before the first
    // start looks stale in Postgres, the executor leaves it as busy instead of running it.
    assert.ok(crashes >= 1 && crashes <= 2, `${crashes} crashes`);

    const nc = await connect({ servers: natsUrl() });
    try {
      const jsm = await jetstreamManager(nc);
      const message = await jsm.streams.getMessage(createBusCatalog(prefix).streams.steps, {
        seq: letter.stream_seq,
      });
      assert.equal(message, null, 'the message is deleted from the steps stream');
    } finally {
      await nc.close();
    }
  });
});

describe('after the poison message', () => {
  it('leaves every task final or progressing, with histories in the table', async () => {
    await assertDatabaseInvariants(e2e.handle);
  });
});

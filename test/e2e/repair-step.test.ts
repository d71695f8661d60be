/**
 * The repair step end to end (ARCHITECTURE.md, errors and retries: "schema validation goes to the
 * task's repair step when it declares one, otherwise failed_terminal"): a step whose output fails
 * its schema hands over to its repair step, which receives what failed and fixes it, and the task
 * succeeds; the same step without a repair step fails the task with class `schema_validation`,
 * attempted once. Both histories are paths in the transition table.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { TaskEvent } from '@sluice/api';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertHistoryInTable, historyEntries } from '../support/history.js';
import { assertDatabaseInvariants } from '../support/invariants.js';

const TASK_MODULE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'repair-task-types.ts');

let e2e: E2eStack;

before(async () => {
  e2e = await startE2eStack({
    label: 'repair',
    resources: ['tool:repair'],
    env: {
      SLUICE_TASK_MODULES: TASK_MODULE,
      SLUICE_SCHEDULER_POLL_MS: '100',
      SLUICE_WATCH_RECHECK_MS: '500',
    },
  });
});

after(async () => {
  await e2e?.stop();
});

/** Creates a task and returns its events until it is final. */
async function runToEnd(type: string, modelAnswer: string): Promise<[string, TaskEvent[]]> {
  const { task } = await e2e.client.createTask({
    type,
    priority: 'PRIORITY_P1',
    input: { modelAnswer },
  });
  const events: TaskEvent[] = [];
  for await (const event of e2e.client.watchTask(task.task_id, 0, AbortSignal.timeout(60_000)))
    events.push(event);
  return [task.task_id, events];
}

async function stepsOf(taskId: string) {
  return e2e.handle.sql<{ name: string; status: string; attempts: number }[]>`
    select name, status, attempts from task_steps where task_id = ${taskId} order by seq`;
}

describe('repair step', () => {
  it('fixes a step whose output failed its schema, and the task succeeds', async () => {
    const [taskId, events] = await runToEnd('repair-draft', '{"words":"one two three"}');
    assertHistoryInTable(historyEntries(events), 'repaired task');
    const repair = events.find((e) => e.type === 'continue');
    assert.ok(repair, 'the repair is a continue of the running task');
    const data = JSON.parse(repair.data) as Record<string, unknown>;
    assert.equal(data['repair_of'], 'draft');
    assert.equal(data['error_class'], 'schema_validation');
    assert.deepEqual(data['next'], ['fix']);

    const { task } = await e2e.client.getTask(taskId);
    assert.equal(task.status, 'TASK_STATUS_SUCCEEDED');
    const output = JSON.parse(task.output) as { words: number; repairOf: string; error: string };
    assert.equal(output.words, 3, 'the repair step read what draft returned');
    assert.equal(output.repairOf, 'draft');
    assert.match(output.error, /words/, 'the repair step got the validation message');
    assert.deepEqual(
      (await stepsOf(taskId)).map((s) => [s.name, s.status, s.attempts]),
      [
        ['draft', 'failed', 1],
        ['fix', 'succeeded', 1],
      ],
      'draft ran once (never retried), fix once',
    );
  });

  it('runs no repair when the output is valid', async () => {
    const [taskId, events] = await runToEnd('repair-draft', '{"words":7}');
    assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    assert.deepEqual(
      (await stepsOf(taskId)).map((s) => s.name),
      ['draft'],
    );
  });

  it('fails the task as schema_validation without a repair step, after one attempt', async () => {
    const [taskId, events] = await runToEnd('repair-none', '{"words":"many"}');
    assertHistoryInTable(historyEntries(events), 'unrepaired task');
    const last = events.at(-1);
    assert.equal(last?.type, 'fail_terminal');
    assert.equal(last.to_status, 'TASK_STATUS_FAILED_TERMINAL');
    const { task } = await e2e.client.getTask(taskId);
    assert.equal(task.error?.error_class, 'ERROR_CLASS_SCHEMA_VALIDATION');
    assert.equal(task.error?.retryable, false);
    assert.deepEqual(
      (await stepsOf(taskId)).map((s) => [s.name, s.status, s.attempts]),
      [['draft', 'failed', 1]],
    );
  });

  it('leaves the database consistent', async () => {
    await assertDatabaseInvariants(e2e.handle);
  });
});

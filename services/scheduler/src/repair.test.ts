/**
 * The outcome applier's repair path against the real Postgres: a step that fails
 * `schema_validation` and declares a repair step continues with that step (its input says what
 * failed), whose result continues the task; repairs are bounded by the step's `maxAttempts`; a step
 * without a repair step fails the task. Every history stays a path in the transition table.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  eventFromRecord,
  historyProblem,
  type HistoryEntry,
  type Json,
  type StepOutcome,
} from '@sluice/core';
import {
  applyTransition,
  createTask,
  createTenant,
  listTaskEvents,
  migrateDatabase,
  openDatabase,
  registerTaskType,
  type DatabaseHandle,
  type TaskTypeManifest,
} from '@sluice/db';
import { createTestDatabase, migratedTemplate, type TestDatabase } from '@sluice/db/testing';
import { createLogger, createMetrics } from '@sluice/telemetry';
import { applyOutcomeBatch } from './outcome-applier.js';

const manifest: TaskTypeManifest = {
  name: 'repairable',
  version: 1,
  description: '',
  inputSchema: { type: 'object' },
  firstStep: 'draft',
  steps: [
    { name: 'draft', resource: 'llm', timeoutMs: 1_000, maxAttempts: 2, repairStep: 'fix' },
    { name: 'fix', resource: 'llm', timeoutMs: 1_000, maxAttempts: 1 },
    { name: 'plain', resource: 'llm', timeoutMs: 1_000, maxAttempts: 3 },
  ],
};
const plainManifest: TaskTypeManifest = { ...manifest, name: 'unrepairable', firstStep: 'plain' };

const invalid = (message: string, result?: Json): StepOutcome => ({
  type: 'failed',
  error: { errorClass: 'schema_validation', message, retryable: false },
  ...(result ? { result } : {}),
});

let database: TestDatabase;
let handle: DatabaseHandle;

before(async () => {
  database = await createTestDatabase({ template: await migratedTemplate(migrateDatabase) });
  handle = openDatabase(database.url, { max: 4 });
  await createTenant(handle.db, { id: 'acme' });
  await registerTaskType(handle.db, manifest);
  await registerTaskType(handle.db, plainManifest);
});

after(async () => {
  await handle?.close();
  await database?.drop();
});

/** A task started as the dispatcher and executor would have left it; its id. */
async function startedTask(type: TaskTypeManifest, input: Record<string, string>): Promise<string> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: type,
    priority: 2,
    input,
  });
  const started = await applyTransition(handle.db, {
    taskId: task.id,
    event: { type: 'start' },
    step: type.firstStep,
    patch: { currentStep: type.firstStep },
  });
  assert.ok(started.ok);
  return task.id;
}

/** Records `outcome` for the task's one unfinished step named `name`, as an executor would. */
async function finish(taskId: string, name: string, outcome: StepOutcome): Promise<void> {
  const status = outcome.type === 'failed' ? 'failed' : 'succeeded';
  const rows = await handle.sql`
    update task_steps
    set status = ${status}, attempts = attempts + 1, finished_at = now(),
        outcome = ${JSON.stringify(outcome)}::jsonb
    where task_id = ${taskId} and name = ${name} and status in ('ready', 'dispatched', 'running')
    returning id`;
  assert.equal(rows.length, 1, `one unfinished ${name} step`);
}

async function applyAll(): Promise<void> {
  const deps = {
    db: handle.db,
    log: createLogger({ service: 'repair-test', level: 'silent' }),
    metrics: createMetrics(),
    batchSize: 10,
    onStepsReady: () => undefined,
    abortRunningSteps: () => undefined,
  };
  while (await applyOutcomeBatch(deps));
}

async function taskOf(taskId: string) {
  const [row] = await handle.sql<
    { status: string; current_step: string | null; output: unknown }[]
  >`select status, current_step, output from tasks where id = ${taskId}`;
  assert.ok(row);
  return row;
}

async function stepsOf(taskId: string) {
  return handle.sql<{ seq: number; name: string; status: string; input: unknown }[]>`
    select seq, name, status, input from task_steps where task_id = ${taskId} order by seq`;
}

/** Asserts the task's transitions are a path in the table; returns them. */
async function assertHistory(taskId: string): Promise<HistoryEntry[]> {
  const events = await listTaskEvents(handle.db, taskId, 0);
  const history = events.flatMap((event): HistoryEntry[] => {
    const core = event.toStatus ? eventFromRecord(event.type, event.data) : undefined;
    return core && event.toStatus ? [{ event: core, toStatus: event.toStatus as never }] : [];
  });
  assert.equal(historyProblem(history), undefined, JSON.stringify(history));
  return history;
}

describe('outcome applier: repair step', () => {
  it('runs the repair step with what failed, and its result completes the task', async () => {
    const taskId = await startedTask(manifest, { topic: 'queues' });
    const returned = { type: 'complete', output: { words: 'not a number' } } as const;
    await finish(taskId, 'draft', invalid('output.words: expected number', returned));
    await applyAll();

    assert.equal((await taskOf(taskId)).status, 'running');
    assert.equal((await taskOf(taskId)).current_step, 'fix');
    const steps = await stepsOf(taskId);
    assert.deepEqual(
      steps.map((s) => [s.name, s.status]),
      [
        ['draft', 'failed'],
        ['fix', 'ready'],
      ],
    );
    assert.deepEqual(steps[1]?.input, {
      repairOf: 'draft',
      input: { topic: 'queues' },
      result: returned,
      error: 'output.words: expected number',
    });
    const events = await listTaskEvents(handle.db, taskId, 0);
    const repair = events.find((e) => e.type === 'continue');
    assert.equal(repair?.data?.['repair_of'], 'draft');
    assert.equal(repair?.data?.['error_class'], 'schema_validation');

    await finish(taskId, 'fix', { type: 'complete', output: { words: 3 } });
    await applyAll();
    const done = await taskOf(taskId);
    assert.equal(done.status, 'succeeded');
    assert.deepEqual(done.output, { words: 3 });
    assert.deepEqual(
      (await assertHistory(taskId)).map((h) => h.event.type),
      ['create', 'start', 'continue', 'complete'],
    );
  });

  it('bounds repairs by the step’s maxAttempts, then fails the task', async () => {
    const taskId = await startedTask(manifest, { topic: 'loops' });
    for (let repair = 1; repair <= 2; repair += 1) {
      await finish(taskId, 'draft', invalid(`bad ${repair}`));
      await applyAll();
      assert.equal((await taskOf(taskId)).status, 'running', `repair ${repair} runs`);
      // The repair hands back to the step, which fails again.
      await finish(taskId, 'fix', {
        type: 'next',
        step: 'draft',
        input: { topic: 'loops' },
        output: null,
      });
      await applyAll();
    }
    await finish(taskId, 'draft', invalid('bad 3'));
    await applyAll();

    assert.equal((await taskOf(taskId)).status, 'failed_terminal');
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.type, 'fail_terminal');
    assert.equal(last?.data?.['reason'], 'repairs_exhausted');
    assert.equal(last?.data?.['error_class'], 'schema_validation');
    assert.equal(last?.data?.['repairs'], 2);
    const fixes = (await stepsOf(taskId)).filter((s) => s.name === 'fix');
    assert.equal(fixes.length, 2, 'two repairs, no third');
    await assertHistory(taskId);
  });

  it('fails the task when the repair step itself fails validation (no repair of a repair)', async () => {
    const taskId = await startedTask(manifest, { topic: 'twice' });
    await finish(taskId, 'draft', invalid('bad'));
    await applyAll();
    await finish(taskId, 'fix', invalid('still bad'));
    await applyAll();
    assert.equal((await taskOf(taskId)).status, 'failed_terminal');
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.step, 'fix');
    assert.equal(last?.data?.['reason'], 'not_retryable');
    await assertHistory(taskId);
  });

  it('fails a step without a repair step as schema_validation, never retried', async () => {
    const taskId = await startedTask(plainManifest, {});
    await finish(taskId, 'plain', invalid('output: expected object'));
    await applyAll();
    assert.equal((await taskOf(taskId)).status, 'failed_terminal');
    const last = (await listTaskEvents(handle.db, taskId, 0)).at(-1);
    assert.equal(last?.data?.['error_class'], 'schema_validation');
    assert.equal(last?.data?.['reason'], 'not_retryable');
    assert.equal((await stepsOf(taskId)).length, 1, 'no step added');
  });

  it('does not repair another class of failure', async () => {
    const taskId = await startedTask(manifest, {});
    await finish(taskId, 'draft', {
      type: 'failed',
      error: { errorClass: 'permission_denied', message: 'HTTP 403', retryable: false },
    });
    await applyAll();
    assert.equal((await taskOf(taskId)).status, 'failed_terminal');
    assert.equal((await stepsOf(taskId)).length, 1);
  });
});

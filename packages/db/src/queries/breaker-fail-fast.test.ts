/**
 * Fail-fast while a breaker is open, against a real Postgres: which ready steps are found (only
 * declared `fail`, of the given resources, due, of startable tasks; a manifest without the field
 * waits), what failing one writes (a started task, a recorded retryable failure counting an attempt,
 * ready for the outcome applier), the retry delay taken from the breaker's cool-down, and that a
 * step is failed at most once when two schedulers race for it. Time is set through `due_at` and the
 * breaker's stored cool-down, never by sleeping.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { CLOSED_BREAKER, type BreakerState } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { GOVERNOR_LEADER_ROLE, saveBreaker } from './breakers.js';
import { advanceLeaderEpoch } from './leader-epochs.js';
import {
  breakerOpenError,
  failStepWhileBreakerOpen,
  findFailFastSteps,
} from './breaker-fail-fast.js';
import { lockUnappliedOutcomes } from './unapplied-outcomes.js';
import type { TaskTypeManifest, WhileBreakerOpen } from './task-types.js';
import { createTask, findTask, listTaskEvents } from './tasks.js';

const FLAKY = 'tool:flaky';

function manifestOf(name: string, whileBreakerOpen?: WhileBreakerOpen): TaskTypeManifest {
  return {
    name,
    version: 1,
    description: '',
    inputSchema: { type: 'object' },
    firstStep: 'call',
    steps: [
      {
        name: 'call',
        resource: FLAKY,
        timeoutMs: 1_000,
        maxAttempts: 2,
        ...(whileBreakerOpen === undefined ? {} : { whileBreakerOpen }),
      },
    ],
  };
}

const failing = manifestOf('fails-fast', 'fail');
const waiting = manifestOf('waits', 'wait');
/** Registered as before the field existed: reads as `wait`. */
const legacy = manifestOf('legacy');

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;
let made = 0;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme'],
    manifests: [failing, waiting, legacy],
    max: 6,
  });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

beforeEach(async () => {
  await handle.db.execute(sql`update task_steps set status = 'cancelled' where status = 'ready'`);
  await handle.db.execute(sql`truncate breakers, breaker_transitions, leader_epochs`);
});

/** Creates a task of `manifest`; returns its id and its first step's id. */
async function makeTask(
  manifest: TaskTypeManifest,
  change: { resource?: string; dueInMs?: number } = {},
): Promise<{ taskId: string; stepId: number }> {
  const { task } = await createTask(handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: { n: made++ },
  });
  const rows = await handle.db.execute<{ id: string }>(sql`
    update task_steps set resource = ${change.resource ?? FLAKY},
      due_at = now() + make_interval(secs => ${(change.dueInMs ?? 0) / 1_000})
    where task_id = ${task.id} returning id
  `);
  return { taskId: task.id, stepId: Number(rows[0]?.id) };
}

function find(resources: readonly string[] = [FLAKY], limit = 100) {
  return findFailFastSteps(handle.db, resources, limit);
}

describe('findFailFastSteps', () => {
  it('finds only due ready steps declared fail, of the given resources and startable tasks', async () => {
    const wanted = await makeTask(failing);
    await makeTask(waiting);
    await makeTask(legacy);
    await makeTask(failing, { resource: 'tool:other' });
    await makeTask(failing, { dueInMs: 60_000 });
    const pausing = await makeTask(failing);
    await handle.db.execute(
      sql`update tasks set pause_requested = true where id = ${pausing.taskId}`,
    );
    const cancelling = await makeTask(failing);
    await handle.db.execute(
      sql`update tasks set cancel_requested = true where id = ${cancelling.taskId}`,
    );

    const found = await find();
    assert.deepEqual(
      found.map((step) => step.stepId),
      [wanted.stepId],
    );
    assert.deepEqual(found[0], {
      stepId: wanted.stepId,
      taskId: wanted.taskId,
      seq: 1,
      name: 'call',
      resource: FLAKY,
    });
    assert.deepEqual(await find([]), [], 'no open breaker, nothing to find');
    assert.deepEqual(await find(['tool:elsewhere']), []);
  });

  it('honours the limit, most urgent first', async () => {
    const first = await makeTask(failing, { dueInMs: -2_000 });
    const second = await makeTask(failing, { dueInMs: -1_000 });
    await makeTask(failing);
    assert.deepEqual(
      (await find([FLAKY], 2)).map((step) => step.stepId),
      [first.stepId, second.stepId],
    );
  });

  it("asks for the rest of the breaker's cool-down as the retry delay, when one runs", async () => {
    await makeTask(failing);
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const save = (coolDownUntilMs: number | null) =>
      saveBreaker(
        handle.db,
        {
          resource: FLAKY,
          state: { ...CLOSED_BREAKER, status: 'open', coolDownUntilMs, reason: 'failures' },
        },
        epoch,
      );
    assert.ok(await save(Date.now() + 30_000));
    const [withCoolDown] = await find();
    const asked = withCoolDown?.retryAfterMs ?? -1;
    assert.ok(asked > 25_000 && asked <= 30_000, `asked ${asked} ms`);
  });

  it("leaves a step waiting once the breaker's cool-down is over, for its half-open probes", async () => {
    const { stepId } = await makeTask(failing);
    const epoch = await advanceLeaderEpoch(handle.db, GOVERNOR_LEADER_ROLE, 'gov-a');
    const save = (state: BreakerState) => saveBreaker(handle.db, { resource: FLAKY, state }, epoch);
    // Open, its cool-down over: the governor moves it to half-open at its next tick (up to a
    // second on), and the decision the scheduler reads says open until then. A step failed fast
    // meanwhile retried after its backoff alone (often less than that), failed fast again, and so
    // spent its attempts before a probe could run; with them gone, its task failed for good.
    const open = { ...CLOSED_BREAKER, status: 'open' as const, reason: 'failures' };
    assert.ok(await save({ ...open, coolDownUntilMs: Date.now() - 1_000 }));
    assert.deepEqual(await find(), [], 'it waits for the half-open state');
    // Half-open in Postgres while the decision still says open (forced open by an override, or a
    // decision not yet published): the step's backoff decides, as for a forced breaker.
    assert.ok(await save({ ...CLOSED_BREAKER, status: 'half_open', halfOpenSinceMs: Date.now() }));
    const [forced] = await find();
    assert.deepEqual(forced && { stepId: forced.stepId, asked: forced.retryAfterMs }, {
      stepId,
      asked: undefined,
    });
  });
});

describe('failStepWhileBreakerOpen', () => {
  it('starts the task and records a retryable failure that counts an attempt', async () => {
    const { taskId, stepId } = await makeTask(failing);
    const [step] = await find();
    assert.ok(step);
    assert.equal(await handle.db.transaction((tx) => failStepWhileBreakerOpen(tx, step)), true);

    const [row] = await handle.db.execute<{
      status: string;
      attempts: number;
      dispatch_count: number;
      outcome: unknown;
      outcome_applied_at: Date | null;
    }>(sql`
      select status, attempts, dispatch_count, outcome, outcome_applied_at
      from task_steps where id = ${stepId}
    `);
    assert.deepEqual(row, {
      status: 'failed',
      attempts: 1,
      dispatch_count: 1,
      outcome: {
        type: 'failed',
        error: {
          errorClass: 'external_5xx',
          message: 'circuit breaker of tool:flaky is open',
          retryable: true,
        },
      },
      outcome_applied_at: null,
    });
    assert.equal((await findTask(handle.db, 'acme', taskId))?.status, 'running');
    const events = await listTaskEvents(handle.db, taskId, 0);
    assert.deepEqual(
      events.map((event) => event.type),
      ['create', 'start', 'step_failed'],
    );
    assert.deepEqual(events[2]?.data, {
      seq: 1,
      error: 'circuit breaker of tool:flaky is open',
    });

    // The outcome applier picks it up like an executor's.
    const unapplied = await handle.db.transaction((tx) => lockUnappliedOutcomes(tx, 10));
    assert.deepEqual(
      unapplied.outcomes.map((o) => [o.stepId, o.attempts, o.outcome.type]),
      [[stepId, 1, 'failed']],
    );
    assert.deepEqual([...unapplied.tasks.keys()], [taskId]);
    await handle.db.execute(
      sql`update task_steps set outcome_applied_at = now() where id = ${stepId}`,
    );

    // Already failed: nothing more to do.
    assert.equal(await handle.db.transaction((tx) => failStepWhileBreakerOpen(tx, step)), false);
  });

  it('does not start a running task again, and carries the retry delay', async () => {
    const { taskId } = await makeTask(failing);
    await handle.db.execute(sql`update tasks set status = 'running' where id = ${taskId}`);
    const [step] = await find();
    assert.ok(step);
    assert.ok(
      await handle.db.transaction((tx) =>
        failStepWhileBreakerOpen(tx, { ...step, retryAfterMs: 1_234 }),
      ),
    );
    const events = await listTaskEvents(handle.db, taskId, 0);
    assert.deepEqual(
      events.map((event) => event.type),
      ['create', 'step_failed'],
    );
    const [row] = await handle.db.execute<{ outcome: unknown }>(
      sql`select outcome from task_steps where task_id = ${taskId}`,
    );
    assert.deepEqual(row?.outcome, {
      type: 'failed',
      error: breakerOpenError(FLAKY, 1_234),
    });
    assert.equal(breakerOpenError(FLAKY, 1_234).retryAfterMs, 1_234);
  });

  it('changes nothing for a step claimed meanwhile or a task paused meanwhile', async () => {
    const claimed = await makeTask(failing);
    const paused = await makeTask(failing);
    const found = await find();
    assert.equal(found.length, 2);
    await handle.db.execute(
      sql`update task_steps set status = 'dispatched' where id = ${claimed.stepId}`,
    );
    await handle.db.execute(
      sql`update tasks set pause_requested = true where id = ${paused.taskId}`,
    );
    for (const step of found) {
      assert.equal(await handle.db.transaction((tx) => failStepWhileBreakerOpen(tx, step)), false);
    }
    const rows = await handle.db.execute<{ n: number }>(sql`
      select count(*)::int as n from task_steps
      where id in (${claimed.stepId}, ${paused.stepId}) and (attempts > 0 or outcome is not null)
    `);
    assert.equal(rows[0]?.n, 0);
  });

  it('fails a step once when two schedulers race for it', async () => {
    const { stepId } = await makeTask(failing);
    const [step] = await find();
    assert.ok(step);
    const results = await Promise.all(
      [0, 1].map(() => handle.db.transaction((tx) => failStepWhileBreakerOpen(tx, step))),
    );
    assert.deepEqual(results.sort(), [false, true]);
    const [row] = await handle.db.execute<{ attempts: number; events: number }>(sql`
      select attempts,
        (select count(*)::int from task_events e
          where e.task_id = s.task_id and e.type = 'step_failed') as events
      from task_steps s where id = ${stepId}
    `);
    assert.deepEqual(row, { attempts: 1, events: 1 });
  });
});

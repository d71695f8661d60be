/**
 * When known work falls due: the next open timer (due or not), the next ready step not due yet,
 * in milliseconds by Postgres's clock. A database of its own, so that no other test's rows count.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import { msUntilNextReadyStep, msUntilNextTimer } from './due-work.js';
import { createTask } from './tasks.js';
import { TimerKind, addTimer } from './timers.js';

const manifest = oneStepManifest();

let fixture: TaskTypeDatabase;
let made = 0;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest] });
});

after(async () => {
  await fixture?.close();
});

beforeEach(async () => {
  await fixture.handle.db.execute(sql`delete from task_timers`);
  await fixture.handle.db.execute(sql`update task_steps set status = 'succeeded'`);
});

/** A task whose first step is ready and due `inSeconds` from now (negative: in the past). */
async function readyStepDueIn(inSeconds: number): Promise<string> {
  const { task } = await createTask(fixture.handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: { n: made++ },
  });
  await fixture.handle.db.execute(sql`
    update task_steps set due_at = now() + make_interval(secs => ${inSeconds})
    where task_id = ${task.id}
  `);
  return task.id;
}

/** Milliseconds from now: what the answer should be, give or take the statements between. */
function about(actual: number | undefined, expectedMs: number): void {
  assert.ok(actual !== undefined, 'an answer');
  assert.ok(actual <= expectedMs && actual > expectedMs - 5_000, `${actual} ≈ ${expectedMs}`);
}

describe('msUntilNextTimer', () => {
  it('is undefined without open timers', async () => {
    assert.equal(await msUntilNextTimer(fixture.handle.db), undefined);
  });

  it('is the earliest open timer’s, closed ones aside, and 0 or less once one is due', async () => {
    const taskId = await readyStepDueIn(0);
    const inSeconds = (s: number) => new Date(Date.now() + s * 1_000);
    await addTimer(fixture.handle.db, {
      taskId,
      kind: TimerKind.RetryBackoff,
      dueAt: inSeconds(90),
    });
    await addTimer(fixture.handle.db, {
      taskId,
      kind: TimerKind.RetryBackoff,
      dueAt: inSeconds(30),
    });
    await addTimer(fixture.handle.db, {
      taskId,
      kind: TimerKind.RetryBackoff,
      dueAt: inSeconds(10),
    });
    await fixture.handle.db.execute(
      sql`update task_timers set done_at = now() where due_at < now() + interval '20 seconds'`,
    );
    about(await msUntilNextTimer(fixture.handle.db), 30_000);

    await addTimer(fixture.handle.db, {
      taskId,
      kind: TimerKind.RetryBackoff,
      dueAt: inSeconds(-2),
    });
    const due = await msUntilNextTimer(fixture.handle.db);
    assert.ok(due !== undefined && due <= -1_000, `due: ${due}`);
  });
});

describe('msUntilNextReadyStep', () => {
  it('is undefined without ready steps, and while every ready step is due', async () => {
    assert.equal(await msUntilNextReadyStep(fixture.handle.db), undefined);
    await readyStepDueIn(-5);
    assert.equal(await msUntilNextReadyStep(fixture.handle.db), undefined);
  });

  it('is the earliest of the ready steps not due yet; other steps do not count', async () => {
    await readyStepDueIn(-5);
    await readyStepDueIn(120);
    await readyStepDueIn(45);
    const finished = await readyStepDueIn(2);
    await fixture.handle.db.execute(
      sql`update task_steps set status = 'succeeded' where task_id = ${finished}`,
    );
    about(await msUntilNextReadyStep(fixture.handle.db), 45_000);
  });
});

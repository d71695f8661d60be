/**
 * The deferred record of published dispatches: written after the delay, many passes in one
 * statement; a sequence a start recorded first is kept; a failed write is tried again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTask } from '@sluice/db';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '@sluice/db/testing';
import { createCapturingLogger } from '@sluice/telemetry/testing';
import { PublicationRecorder, type PublishedDispatch } from './publication-recorder.js';

const manifest = oneStepManifest({ resource: 'tool:x', name: 'recorded' });

/** Longer than any test: only `flush` writes. */
const NEVER_MS = 600_000;

let fixture: TaskTypeDatabase;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme'], manifests: [manifest] });
});

after(async () => {
  await fixture?.close();
});

/** A step as the dispatcher leaves it: dispatched (dispatch 1), no sequence recorded. */
async function dispatchedStep(): Promise<number> {
  const { task } = await createTask(fixture.handle.db, {
    tenantId: 'acme',
    taskType: manifest,
    priority: 2,
    input: {},
  });
  const [row] = await fixture.handle.sql<{ id: string }[]>`
    update task_steps set status = 'dispatched', dispatch_count = 1
    where task_id = ${task.id} returning id
  `;
  return Number(row?.id);
}

async function publishSeqOf(stepId: number): Promise<number | null> {
  const [row] = await fixture.handle.sql<{ publish_seq: string | null }[]>`
    select publish_seq from task_steps where id = ${stepId}
  `;
  return row?.publish_seq === null || row === undefined ? null : Number(row.publish_seq);
}

describe('publication recorder', () => {
  it('writes the records of several passes at the flush, keeping a sequence a start wrote', async () => {
    const { log } = createCapturingLogger('recorder-test', 'warn');
    const recorder = new PublicationRecorder({ db: fixture.handle.db, log, delayMs: NEVER_MS });
    const [a, b, started] = [
      await dispatchedStep(),
      await dispatchedStep(),
      await dispatchedStep(),
    ];
    await fixture.handle.sql`
      update task_steps set status = 'running', publish_seq = 77 where id = ${started}
    `;
    recorder.record([{ stepId: a, dispatch: 1, publishSeq: 10 }]);
    recorder.record([
      { stepId: b, dispatch: 1, publishSeq: 11 },
      { stepId: started, dispatch: 1, publishSeq: 12 },
    ]);
    assert.equal(await publishSeqOf(a), null, 'not before the delay');
    await recorder.flush();
    assert.deepEqual(
      [await publishSeqOf(a), await publishSeqOf(b), await publishSeqOf(started)],
      [10, 11, 77],
    );
    await recorder.stop();
    assert.throws(() => recorder.record([{ stepId: a, dispatch: 1, publishSeq: 13 }]), /stopped/);
  });

  it(
    'skips a step another transaction holds (a start records it itself) instead of waiting',
    { timeout: 30_000 },
    async () => {
      const { log } = createCapturingLogger('recorder-test', 'warn');
      const recorder = new PublicationRecorder({ db: fixture.handle.db, log, delayMs: NEVER_MS });
      const [held, free] = [await dispatchedStep(), await dispatchedStep()];
      let release = (): void => undefined;
      let locked = (): void => undefined;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holder = fixture.handle.sql.begin(async (tx) => {
        await tx`select id from task_steps where id = ${held} for update`;
        locked();
        await new Promise<void>((resolve) => (release = resolve));
      });
      try {
        await isLocked;
        recorder.record([
          { stepId: held, dispatch: 1, publishSeq: 41 },
          { stepId: free, dispatch: 1, publishSeq: 42 },
        ]);
        await recorder.flush(); // would wait for the holder (forever, here) if it did not skip
        assert.equal(await publishSeqOf(free), 42);
        assert.equal(await publishSeqOf(held), null);
      } finally {
        release();
        await holder;
        await recorder.stop();
      }
    },
  );

  it('writes after the delay by itself', async () => {
    const { log } = createCapturingLogger('recorder-test', 'warn');
    const recorder = new PublicationRecorder({ db: fixture.handle.db, log, delayMs: 20 });
    const step = await dispatchedStep();
    recorder.record([{ stepId: step, dispatch: 1, publishSeq: 21 }]);
    const deadline = Date.now() + 10_000;
    while ((await publishSeqOf(step)) === null) {
      assert.ok(Date.now() < deadline, 'written within 10 s of a 20 ms delay');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(await publishSeqOf(step), 21);
    await recorder.stop();
  });

  it('keeps the records of a failed write and writes them with the next', async () => {
    const { log, lines } = createCapturingLogger('recorder-test', 'warn');
    let failNext = true;
    // The real database, but its next statement fails as if Postgres were down.
    const flaky = new Proxy(fixture.handle.db, {
      get(target, property, receiver) {
        if (property === 'execute' && failNext) {
          failNext = false;
          return () => Promise.reject(new Error('connection refused'));
        }
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    const recorder = new PublicationRecorder({ db: flaky, log, delayMs: NEVER_MS });
    const [first, second] = [await dispatchedStep(), await dispatchedStep()];
    const published: PublishedDispatch[] = [{ stepId: first, dispatch: 1, publishSeq: 31 }];
    recorder.record(published);
    await recorder.flush();
    assert.equal(await publishSeqOf(first), null);
    assert.match(lines.join(''), /could not record publication sequences/);
    recorder.record([{ stepId: second, dispatch: 1, publishSeq: 32 }]);
    await recorder.stop();
    assert.deepEqual([await publishSeqOf(first), await publishSeqOf(second)], [31, 32]);
  });
});

/**
 * The dead letter queries against the real Postgres: insertion, keyset pages with and without a
 * tenant filter, the redrive mark (once, under a row lock) and purge.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { SerializedStepError } from '@sluice/core';
import type { DatabaseHandle } from '../client.js';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '../testing/index.js';
import {
  deadLettersOfTask,
  insertDeadLetter,
  listDeadLetters,
  lockDeadLetter,
  markDeadLetterRedriven,
  purgeDeadLetters,
} from './dead-letters.js';
import { createTask } from './tasks.js';

const manifest = oneStepManifest({ maxAttempts: 3 });

const error: SerializedStepError = {
  errorClass: 'external_5xx',
  message: 'HTTP 500 from the LLM',
  retryable: true,
};

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({
    tenants: ['acme', 'globex'],
    manifests: [manifest],
    max: 4,
  });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** A new task of `tenantId` with one dead letter; returns the letter's id and the task's. */
async function deadLetter(tenantId: string): Promise<{ id: string; taskId: string }> {
  const { task } = await createTask(handle.db, {
    tenantId,
    taskType: manifest,
    priority: 2,
    input: {},
  });
  const id = await insertDeadLetter(handle.db, {
    taskId: task.id,
    tenantId,
    step: 'only',
    stepSeq: 1,
    reason: 'attempts_exhausted',
    error,
    attempts: 3,
  });
  return { id, taskId: task.id };
}

describe('dead letters', () => {
  it('insertDeadLetter records every field; redriven_at and stream_seq start empty', async () => {
    const { id, taskId } = await deadLetter('acme');
    const [stored] = await deadLettersOfTask(handle.db, taskId);
    assert.ok(stored);
    assert.equal(stored.id, id);
    assert.deepEqual(
      { ...stored, createdAt: undefined },
      {
        id,
        taskId,
        tenantId: 'acme',
        step: 'only',
        stepSeq: 1,
        reason: 'attempts_exhausted',
        error,
        attempts: 3,
        streamSeq: null,
        createdAt: undefined,
        redrivenAt: null,
      },
    );
    assert.ok(stored.createdAt instanceof Date);
  });

  it('refuses a reason outside the known ones', async () => {
    const { taskId } = await deadLetter('acme');
    await assert.rejects(
      insertDeadLetter(handle.db, {
        taskId,
        tenantId: 'acme',
        step: 'only',
        stepSeq: 1,
        // @ts-expect-error — the check constraint is the last line of defence
        reason: 'bored',
        error,
        attempts: 1,
      }),
    );
  });

  it('listDeadLetters pages oldest first, each letter once, and filters by tenant', async () => {
    const globex = [
      await deadLetter('globex'),
      await deadLetter('globex'),
      await deadLetter('globex'),
    ];
    await deadLetter('acme');
    const all = await listDeadLetters(handle.db, { limit: 1_000 });
    const order = all.map((l) => `${l.createdAt.getTime()}:${l.id}`);
    assert.deepEqual(order, [...order].sort(), 'ordered by (created_at, id)');

    const pages: string[] = [];
    let after: { createdAt: Date; id: string } | undefined;
    for (;;) {
      const page = await listDeadLetters(handle.db, {
        limit: 2,
        tenantId: 'globex',
        ...(after ? { after } : {}),
      });
      pages.push(...page.map((l) => l.id));
      const last = page.at(-1);
      if (page.length < 2 || !last) break;
      after = { createdAt: last.createdAt, id: last.id };
    }
    assert.deepEqual(
      pages,
      globex.map((l) => l.id),
    );
  });

  it('markDeadLetterRedriven marks a letter once; lockDeadLetter sees the mark', async () => {
    const { id } = await deadLetter('acme');
    await handle.db.transaction(async (tx) => {
      assert.equal((await lockDeadLetter(tx, id))?.redrivenAt, null);
      assert.equal(await markDeadLetterRedriven(tx, id), true);
      assert.equal(await markDeadLetterRedriven(tx, id), false, 'already redriven');
    });
    await handle.db.transaction(async (tx) => {
      assert.ok((await lockDeadLetter(tx, id))?.redrivenAt instanceof Date);
      assert.equal(await lockDeadLetter(tx, randomUUID()), undefined);
    });
  });

  it('purgeDeadLetters deletes the named letters and reports the ones that existed', async () => {
    const a = await deadLetter('acme');
    const b = await deadLetter('acme');
    const unknown = randomUUID();
    const purged = await purgeDeadLetters(handle.db, [a.id, unknown]);
    assert.deepEqual(purged, [a.id]);
    assert.deepEqual(await deadLettersOfTask(handle.db, a.taskId), []);
    assert.equal((await deadLettersOfTask(handle.db, b.taskId)).length, 1);
    assert.deepEqual(await purgeDeadLetters(handle.db, []), []);
  });
});

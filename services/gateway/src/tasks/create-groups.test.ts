/**
 * Group commit of creates against the real Postgres: creates of a tenant that arrive during a
 * write go together in the next, each with its own answer; one key never twice in a write; a key
 * reused with other input, or data Postgres refuses, fails only its own call; tenants never share a write; a group of P0
 * creates claims their steps once, and they are published before anyone is answered.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SluiceError, type Priority } from '@sluice/core';
import {
  StaleReads,
  createApiKey,
  findLatestTaskTypes,
  hashApiKey,
  isWriteRefused,
  type RememberedReads,
  type AdmissionSettings,
  type ClaimedStep,
  type DatabaseHandle,
  type NewTask,
  type SubmitTaskResult,
} from '@sluice/db';
import { oneStepManifest, openTaskTypeDatabase, type TaskTypeDatabase } from '@sluice/db/testing';
import { CreateGroups, type CreateGroupsDeps, type GroupedCreate } from './create-groups.js';

const manifest = oneStepManifest();

const admission: AdmissionSettings = { defaultResourceLimit: 64, agingMs: 30_000 };

let fixture: TaskTypeDatabase;
let handle: DatabaseHandle;

before(async () => {
  fixture = await openTaskTypeDatabase({ tenants: ['acme', 'globex'], manifests: [manifest] });
  handle = fixture.handle;
});

after(async () => {
  await fixture?.close();
});

/** A create of the test's type; `key` and `n` make it unique to its test. */
function task(n: number, extra: Partial<NewTask> = {}): NewTask {
  return { tenantId: 'acme', taskType: manifest, priority: 2, input: { n }, ...extra };
}

/** Groups on the fixture's database, recording what each write claimed after its commit. */
function groupsRecordingCommits(urgent = false) {
  const commits: Array<readonly ClaimedStep[]> = [];
  const deps: CreateGroupsDeps = {
    db: handle.db,
    urgentClaimFor: (priorities: readonly Priority[]) =>
      urgent && priorities.includes(0) ? { admission } : undefined,
    afterCommit: (claimed) => {
      commits.push(claimed);
      return Promise.resolve();
    },
  };
  return { groups: new CreateGroups(deps), commits };
}

function idOf(result: SubmitTaskResult): string {
  return result.kind === 'deleted' ? result.tombstone.taskId : result.task.id;
}

async function tasksWithInputN(from: number, to: number): Promise<number> {
  const [row] = await handle.sql<{ n: number }[]>`
    select count(*)::int as n from tasks where (input->>'n')::int between ${from} and ${to}`;
  return row?.n ?? -1;
}

describe('CreateGroups', () => {
  it('writes a lone create at once, and the creates that came during it in one write after', async () => {
    const { groups, commits } = groupsRecordingCommits();
    const first = groups.write(task(100));
    const during = Array.from({ length: 19 }, (_, i) => groups.write(task(101 + i)));
    const answers: GroupedCreate[] = [await first, ...(await Promise.all(during))];

    assert.equal(answers[0]?.groupSize, 1, 'nothing was being written: no wait to gather more');
    assert.deepEqual(new Set(answers.slice(1).map((a) => a.groupSize)), new Set([19]));
    assert.equal(commits.length, 2, 'two transactions for twenty creates');
    assert.ok(answers.every((a) => a.result.kind === 'created'));
    assert.deepEqual(
      answers.map((a) => (a.result.kind === 'created' ? a.result.task.input : null)),
      Array.from({ length: 20 }, (_, i) => ({ n: 100 + i })),
      'each caller is answered with its own task',
    );
    assert.equal(await tasksWithInputN(100, 119), 20);
  });

  it('never puts one idempotency key twice in a write: the repeat finds the first task', async () => {
    const { groups, commits } = groupsRecordingCommits();
    const blocker = groups.write(task(200));
    const [a, b, c] = await Promise.all([
      groups.write(task(201, { idempotencyKey: 'group-k1' })),
      groups.write(task(201, { idempotencyKey: 'group-k1' })),
      groups.write(task(202, { idempotencyKey: 'group-k2' })),
    ]);
    await blocker;
    assert.equal(a.result.kind, 'created');
    assert.equal(b.result.kind, 'existing');
    assert.equal(idOf(b.result), idOf(a.result));
    assert.equal(c.result.kind, 'created');
    assert.deepEqual(
      [a.groupSize, b.groupSize, c.groupSize],
      [2, 1, 2],
      'the repeat waited for the write after its first',
    );
    assert.equal(commits.length, 3);
    assert.equal(await tasksWithInputN(200, 202), 3);
  });

  it('fails only the call that reused a key with other input; the rest of its group is created', async () => {
    const { groups } = groupsRecordingCommits();
    await groups.write(task(300, { idempotencyKey: 'group-taken' }));
    const blocker = groups.write(task(301));
    const others = [302, 303].map((n) => groups.write(task(n, { idempotencyKey: `group-${n}` })));
    const reused = groups.write(task(399, { idempotencyKey: 'group-taken' }));
    await blocker;
    await assert.rejects(
      reused,
      (error: unknown) => error instanceof SluiceError && error.code === 'already_exists',
    );
    const created = await Promise.all(others);
    assert.deepEqual(
      created.map((a) => [a.result.kind, a.groupSize]),
      [
        ['created', 1],
        ['created', 1],
      ],
      'written again one at a time after the group was refused',
    );
    assert.equal(await tasksWithInputN(300, 303), 4);
    assert.equal(await tasksWithInputN(399, 399), 0, 'nothing of the refused create');
  });

  it('fails only the create whose data Postgres refuses; the rest of its group is created', async () => {
    const { groups } = groupsRecordingCommits();
    const blocker = groups.write(task(350));
    // The gateway refuses U+0000 before writing; this create comes straight to the group.
    const refused = groups.write({ ...task(351), input: { n: 351, text: 'a\u0000b' } });
    const others = [352, 353].map((n) => groups.write(task(n)));
    await blocker;
    await assert.rejects(refused, (error: unknown) => isWriteRefused(error));
    const created = await Promise.all(others);
    assert.deepEqual(
      created.map((a) => [a.result.kind, a.groupSize]),
      [
        ['created', 1],
        ['created', 1],
      ],
    );
    assert.equal(await tasksWithInputN(350, 353), 3);
  });

  it('refuses the remembered creates of a group whose reads went stale, and writes the rest again', async () => {
    const { groups, commits } = groupsRecordingCommits();
    const key = await createApiKey(handle.db, { tenantId: 'acme' });
    const type = (await findLatestTaskTypes(handle.db, [manifest.name])).get(manifest.name);
    assert.ok(type);
    const reads = (apiKey: string): RememberedReads => ({
      keyHashes: [hashApiKey(apiKey)],
      types: [{ name: type.name, version: type.version, registeredStamp: type.registeredStamp }],
    });
    const blocker = groups.write(task(360), reads(key));
    // A key no tenant has stands for one revoked since the gateway remembered it.
    const stale = groups.write(task(361), reads('slk_revoked_since'));
    const held = groups.write(task(362), reads(key));
    const fresh = groups.write(task(363));
    assert.equal((await blocker).result.kind, 'created', 'remembered reads that hold');
    // The group's check cannot say whose reads changed: each remembered create is refused (its
    // caller reads again), and the create checked on fresh reads is written again without them.
    await assert.rejects(stale, StaleReads);
    await assert.rejects(held, StaleReads);
    const written = await fresh;
    assert.deepEqual([written.result.kind, written.groupSize], ['created', 1]);
    assert.equal(commits.length, 2, 'the refused group committed nothing');
    assert.deepEqual(await tasksWithInputN(360, 363), 2);
  });

  it('never writes two tenants together', async () => {
    const { groups, commits } = groupsRecordingCommits();
    const acme = [400, 401, 402].map((n) => groups.write(task(n)));
    const globex = [403, 404].map((n) => groups.write(task(n, { tenantId: 'globex' })));
    const answers = await Promise.all([...acme, ...globex]);
    assert.deepEqual(
      answers.map((a) => a.groupSize),
      [1, 2, 2, 1, 1],
    );
    assert.equal(commits.length, 4);
    const rows = await handle.sql<{ tenant_id: string; n: number }[]>`
      select tenant_id, (input->>'n')::int as n from tasks
      where (input->>'n')::int between 400 and 404 order by 2`;
    assert.deepEqual(
      rows.map((row) => row.tenant_id),
      ['acme', 'acme', 'acme', 'globex', 'globex'],
    );
  });

  it("claims a group's P0 steps in its transaction and publishes them before answering", async () => {
    const { groups, commits } = groupsRecordingCommits(true);
    const blocker = groups.write(task(500, { priority: 0 }));
    const urgent = [501, 502, 503].map((n) => groups.write(task(n, { priority: 0 })));
    const low = groups.write(task(504, { priority: 3 }));
    await blocker;
    const answers = await Promise.all([...urgent, low]);

    assert.equal(commits.length, 2);
    const claimedByGroup = commits[1] ?? [];
    assert.equal(claimedByGroup.length, 3, 'one claim for the three P0 creates, not the P3');
    const urgentIds = new Set(answers.slice(0, 3).map((a) => idOf(a.result)));
    assert.deepEqual(new Set(claimedByGroup.map((step) => step.taskId)), urgentIds);
    for (const answer of answers) assert.equal(answer.claimed, claimedByGroup);
    const steps = await handle.sql<{ status: string; n: number }[]>`
      select s.status, (t.input->>'n')::int as n from task_steps s join tasks t on t.id = s.task_id
      where (t.input->>'n')::int between 501 and 504 order by 2`;
    assert.deepEqual(
      steps.map((step) => step.status),
      ['dispatched', 'dispatched', 'dispatched', 'ready'],
    );
  });
});

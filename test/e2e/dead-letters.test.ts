/**
 * Dead letters end to end (the recovery issue's "done when" 7, first half): a step that keeps
 * failing with a 5xx exhausts its attempts, the task ends `failed_terminal` with reason
 * `dead_letter` and a row in `dead_letters`; AdminService lists it (admin key only), a redrive once
 * the fault is gone resumes the task to success, and purge deletes letters. The same again through
 * the real `sluice dlq` binary.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { DeadLetter, ListDeadLettersResponse, TaskEvent } from '@sluice/api';
import { createApiKey } from '@sluice/db';
import { createAdminClient, isServiceError, type AdminClient } from '@sluice/sdk/client';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import { startFakeWebServer, type FakeWebServer } from '../support/fake-web-server.js';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { assertHistoryInTable, historyEntries } from '../support/history.js';
import { REPO_ROOT } from '../support/service-process.js';
import { assertDatabaseInvariants } from '../support/invariants.js';

const SLUICE_BIN = path.join(REPO_ROOT, 'packages/cli/bin/sluice.mjs');
/** research-brief's `outline` step allows three attempts. */
const OUTLINE_ATTEMPTS = 3;

let e2e: E2eStack;
let llm: FakeLlmServer;
let web: FakeWebServer;
let admin: AdminClient;
let adminKey: string;

before(async () => {
  llm = await startFakeLlmServer({ apiKey: 'llm-secret' });
  web = await startFakeWebServer({});
  e2e = await startE2eStack({
    label: 'dlq',
    maxConnections: 4,
    llmBaseUrl: llm.baseUrl,
    llmApiKey: 'llm-secret',
    env: { SLUICE_SCHEDULER_POLL_MS: '200', SLUICE_WATCH_RECHECK_MS: '500' },
  });
  adminKey = await createApiKey(e2e.handle.db, { tenantId: e2e.tenantId, isAdmin: true });
  admin = createAdminClient({ address: e2e.stack.grpcAddress, apiKey: adminKey });
});

after(async () => {
  admin?.close();
  const exits = await e2e?.stop();
  await llm?.stop();
  await web?.stop();
  if (exits) {
    assert.deepEqual(
      Object.values(exits),
      Object.values(exits).map(() => 0),
      'every service stops cleanly',
    );
  }
});

/** The task's events from after `afterSeq` until it is final. */
async function watchToEnd(taskId: string, afterSeq = 0): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const event of e2e.client.watchTask(taskId, afterSeq, AbortSignal.timeout(90_000)))
    events.push(event);
  return events;
}

/** Creates a research brief whose outline step fails with a 500 on every attempt. */
async function createDoomedTask(topic: string): Promise<{ taskId: string; events: TaskEvent[] }> {
  llm.failNext(...Array.from({ length: OUTLINE_ATTEMPTS }, () => ({ status: 500 })));
  const { task } = await e2e.client.createTask({
    type: 'research-brief',
    priority: 'PRIORITY_P1',
    input: { topic, sourceUrl: web.url('/articles/backpressure') },
  });
  return { taskId: task.task_id, events: await watchToEnd(task.task_id) };
}

/** Every dead letter (all pages, two letters a page to exercise the tokens). */
async function allLetters(tenantId = ''): Promise<DeadLetter[]> {
  const letters: DeadLetter[] = [];
  let pageToken = '';
  do {
    const page: ListDeadLettersResponse = await admin.listDeadLetters({
      page_size: 2,
      page_token: pageToken,
      tenant_id: tenantId,
    });
    letters.push(...page.dead_letters);
    pageToken = page.next_page_token;
  } while (pageToken !== '');
  return letters;
}

async function letterOf(taskId: string): Promise<DeadLetter> {
  const letter = (await allLetters()).find((l) => l.task_id === taskId);
  assert.ok(letter, `a dead letter of task ${taskId}`);
  return letter;
}

describe('dead letters', () => {
  it('a step that exhausts its attempts ends failed_terminal with a dead letter', async () => {
    const { taskId, events } = await createDoomedTask('dead letter');
    const last = events.at(-1);
    assert.equal(last?.type, 'fail_terminal');
    assert.equal(last.to_status, 'TASK_STATUS_FAILED_TERMINAL');
    const data = JSON.parse(last.data) as Record<string, unknown>;
    assert.equal(data['reason'], 'dead_letter');
    assert.equal(data['error_class'], 'external_5xx');
    assert.equal(data['attempts'], OUTLINE_ATTEMPTS);

    const rows = await e2e.handle.sql<
      {
        id: string;
        reason: string;
        attempts: number;
        step: string;
        error: { errorClass: string };
      }[]
    >`select id, reason, attempts, step, error from dead_letters where task_id = ${taskId}`;
    assert.equal(rows.length, 1, 'one dead letter');
    const [row] = rows;
    assert.equal(row?.id, data['dead_letter_id'], 'the event names the letter');
    assert.equal(row?.reason, 'attempts_exhausted');
    assert.equal(row?.attempts, OUTLINE_ATTEMPTS);
    assert.equal(row?.step, 'outline');
    assert.equal(row?.error.errorClass, 'external_5xx');
  });

  it('ListDeadLetters shows the letter with its error, attempts and history', async () => {
    const { taskId } = await createDoomedTask('listed');
    const letter = await letterOf(taskId);
    assert.equal(letter.tenant_id, e2e.tenantId);
    assert.equal(letter.step, 'outline');
    assert.equal(letter.step_seq, 1);
    assert.equal(letter.reason, 'DEAD_LETTER_REASON_ATTEMPTS_EXHAUSTED');
    assert.equal(letter.attempts, OUTLINE_ATTEMPTS);
    assert.equal(letter.error?.error_class, 'ERROR_CLASS_EXTERNAL_5XX');
    assert.equal(letter.redrive_time, null);
    assert.equal(letter.task_status, 'TASK_STATUS_FAILED_TERMINAL');
    assert.equal(letter.recent_events.at(-1)?.type, 'fail_terminal');
    assert.equal(letter.recent_events.at(0)?.type, 'create', 'a short history is whole');

    const own = await allLetters(e2e.tenantId);
    assert.ok(own.some((l) => l.dead_letter_id === letter.dead_letter_id));
    assert.deepEqual(await allLetters('nobody'), [], 'the tenant filter applies');
  });

  it('a tenant key is refused with PERMISSION_DENIED', async () => {
    const tenantAdmin = createAdminClient({ address: e2e.stack.grpcAddress, apiKey: e2e.apiKey });
    try {
      for (const call of [
        () => tenantAdmin.listDeadLetters(),
        () => tenantAdmin.redriveDeadLetters([randomUUID()]),
        () => tenantAdmin.purgeDeadLetters([randomUUID()]),
      ]) {
        await assert.rejects(call(), (error) => {
          assert.ok(isServiceError(error));
          assert.equal(error.code, grpcStatus.PERMISSION_DENIED);
          return true;
        });
      }
    } finally {
      tenantAdmin.close();
    }
  });

  it('redrive after the fault is fixed resumes the task to success; a second redrive is refused', async () => {
    const { taskId, events } = await createDoomedTask('redriven');
    const letter = await letterOf(taskId);
    // The fake answers normally once its queued failures are used up: the fault is fixed.
    const unknown = randomUUID();
    const { results } = await admin.redriveDeadLetters([letter.dead_letter_id, unknown]);
    assert.deepEqual(results, [
      { dead_letter_id: letter.dead_letter_id, task_id: taskId, redriven: true, reason: '' },
      { dead_letter_id: unknown, task_id: '', redriven: false, reason: 'dead letter not found' },
    ]);
    const resumed = await watchToEnd(taskId, Number(events.at(-1)?.seq ?? 0));
    assert.equal(resumed.at(0)?.type, 'retry');
    const retryData = JSON.parse(resumed.at(0)?.data ?? '{}') as { dead_letter_id?: string };
    assert.equal(retryData.dead_letter_id, letter.dead_letter_id);
    assert.equal(resumed.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    assertHistoryInTable(historyEntries([...events, ...resumed]), `the history of ${taskId}`);

    const { task } = await e2e.client.getTask(taskId);
    assert.equal(task.status, 'TASK_STATUS_SUCCEEDED');
    assert.equal(task.attempt, 2);
    const marked = await letterOf(taskId);
    assert.ok(marked.redrive_time, 'the letter is marked redriven');
    assert.equal(marked.task_status, 'TASK_STATUS_SUCCEEDED');

    const again = await admin.redriveDeadLetters([letter.dead_letter_id]);
    assert.deepEqual(again.results, [
      {
        dead_letter_id: letter.dead_letter_id,
        task_id: taskId,
        redriven: false,
        reason: 'already redriven',
      },
    ]);
  });

  it('a retry of the task answers its letter: marked redriven, a later redrive changes nothing', async () => {
    const { taskId, events } = await createDoomedTask('retried by hand');
    const letter = await letterOf(taskId);
    await e2e.client.retryTask(taskId);
    assert.notEqual((await letterOf(taskId)).redrive_time, null, 'the retry marked the letter');
    const { results } = await admin.redriveDeadLetters([letter.dead_letter_id]);
    assert.equal(results[0]?.redriven, false);
    assert.match(results[0]?.reason ?? '', /already redriven/);
    const resumed = await watchToEnd(taskId, Number(events.at(-1)?.seq ?? 0));
    assert.equal(resumed.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');
    assert.equal(resumed.filter((e) => e.type === 'retry').length, 1, 'retried once');
  });

  it('purge deletes the named letters and leaves the task alone', async () => {
    const { taskId } = await createDoomedTask('purged');
    const letter = await letterOf(taskId);
    const unknown = randomUUID();
    const { purged_ids: purged } = await admin.purgeDeadLetters([letter.dead_letter_id, unknown]);
    assert.deepEqual(purged, [letter.dead_letter_id]);
    assert.ok(!(await allLetters()).some((l) => l.dead_letter_id === letter.dead_letter_id));
    const { task } = await e2e.client.getTask(taskId);
    assert.equal(task.status, 'TASK_STATUS_FAILED_TERMINAL');
  });

  it('refuses bad requests with INVALID_ARGUMENT', async () => {
    for (const call of [
      () => admin.redriveDeadLetters([]),
      () => admin.purgeDeadLetters(['not-a-uuid']),
      () => admin.listDeadLetters({ page_token: 'bogus' }),
      // The gateway's own form, with a time before year 1, which Postgres cannot compare with.
      () =>
        admin.listDeadLetters({
          page_token: Buffer.from(
            JSON.stringify({
              k: 'dead-letters.v1',
              c: '-100000-01-01T00:00:00.000Z',
              i: randomUUID(),
              t: '',
            }),
          ).toString('base64url'),
        }),
      () => admin.listDeadLetters({ tenant_id: 'Not A Tenant' }),
    ]) {
      await assert.rejects(call(), (error) => {
        assert.ok(isServiceError(error));
        assert.equal(error.code, grpcStatus.INVALID_ARGUMENT);
        return true;
      });
    }
  });
});

/** What a `sluice` run printed and how it exited. */
interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real `sluice` binary against the stack with `apiKey` (the admin key by default). */
function sluice(args: readonly string[], apiKey = adminKey): Promise<CliRun> {
  const child = spawn(process.execPath, [SLUICE_BIN, ...args], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      SLUICE_ADDRESS: e2e.stack.grpcAddress,
      SLUICE_API_KEY: apiKey,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sluice ${args.join(' ')} ran over 60 s:\n${stdout}\n${stderr}`));
    }, 60_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function assertExit(run: CliRun, code: number): void {
  assert.equal(run.code, code, `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
}

describe('sluice dlq', () => {
  it('lists, redrives and purges dead letters, for people and as JSON', async () => {
    const { taskId, events } = await createDoomedTask('from the command line');

    const json = await sluice(['dlq', 'list', '--json', '--tenant', e2e.tenantId]);
    assertExit(json, 0);
    const listed = (JSON.parse(json.stdout) as ListDeadLettersResponse).dead_letters.find(
      (l) => l.task_id === taskId,
    );
    assert.ok(listed, 'the JSON listing has the letter');
    const id = listed.dead_letter_id;

    const human = await sluice(['dlq', 'list']);
    assertExit(human, 0);
    const line = human.stdout.split('\n').find((l) => l.startsWith(id));
    assert.ok(line, `a row for ${id}:\n${human.stdout}`);
    assert.match(line, /outline \(#1\)\s+attempts_exhausted\s+3\s+external_5xx/);
    assert.match(line, /waiting \(task failed_terminal\)/);

    const refused = await sluice(['dlq', 'list'], e2e.apiKey);
    assertExit(refused, 1);
    assert.match(refused.stderr, /PERMISSION_DENIED/);

    const missing = randomUUID();
    const redrive = await sluice(['dlq', 'redrive', id, missing]);
    assertExit(redrive, 1); // one of the two was not redriven
    assert.deepEqual(redrive.stdout.trim().split('\n'), [
      `redriven ${id}: task ${taskId} is queued again`,
      `not redriven ${missing}: dead letter not found`,
    ]);
    const resumed = await watchToEnd(taskId, Number(events.at(-1)?.seq ?? 0));
    assert.equal(resumed.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');

    const again = await sluice(['dlq', 'redrive', '--json', id]);
    assertExit(again, 1);
    assert.deepEqual(JSON.parse(again.stdout), {
      results: [
        { dead_letter_id: id, task_id: taskId, redriven: false, reason: 'already redriven' },
      ],
    });

    const purge = await sluice(['dlq', 'purge', id, missing]);
    assertExit(purge, 0);
    assert.deepEqual(purge.stdout.trim().split('\n'), [`purged ${id}`, `not found ${missing}`]);
    const purgeJson = await sluice(['dlq', 'purge', '--json', id]);
    assertExit(purgeJson, 0);
    assert.deepEqual(JSON.parse(purgeJson.stdout), { purged_ids: [] });

    const usage = await sluice(['dlq', 'redrive']);
    assertExit(usage, 2);
  });
});

describe('after dead letters, redrives and purges', () => {
  it('leaves every task final or progressing, with histories in the table', async () => {
    await assertDatabaseInvariants(e2e.handle);
  });
});

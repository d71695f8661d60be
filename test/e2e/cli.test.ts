/**
 * The `sluice` command line as people run it: the real binary (`node packages/cli/bin/sluice.mjs`)
 * as a child process, against the whole stack (gateway, scheduler, governor, executors as
 * processes, real NATS and Postgres, a fake LLM and a fake web site over HTTP). Each test checks
 * the exit code, what reaches stdout and the `error: <GRPC_CODE>: <message>` line on stderr.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { createApiKey, createTenant } from '@sluice/db';
import type { Task, TaskEvent, TaskStatus } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { REPO_ROOT } from '../support/service-process.js';
import type { Stack } from '../support/stack.js';
import { approvalPrompt } from './cli-task-types.js';

const SLUICE_BIN = path.join(REPO_ROOT, 'packages/cli/bin/sluice.mjs');
const TEST_TASK_MODULE = fileURLToPath(new URL('./cli-task-types.ts', import.meta.url));
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

let e2e: E2eStack;
let stack: Stack;
let apiKey: string;
let adminKey: string;
let client: TaskClient;

before(async () => {
  // No step of the test's task types calls a model: the default endpoint, where nothing answers,
  // will do.
  e2e = await startE2eStack({
    label: 'cli',
    tenantId: 'cli',
    env: {
      SLUICE_SCHEDULER_POLL_MS: '200',
      SLUICE_WATCH_RECHECK_MS: '500',
      SLUICE_LEASE_TTL_MS: '2000',
      SLUICE_TASK_MODULES: TEST_TASK_MODULE,
    },
  });
  ({ stack, apiKey, client } = e2e);
  // The gateway reads keys from the database at each call, so the admin's may come after the start.
  await createTenant(e2e.handle.db, { id: 'cli-ops' });
  adminKey = await createApiKey(e2e.handle.db, { tenantId: 'cli-ops', isAdmin: true });
});

after(async () => {
  await e2e?.stop();
});

interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout split into lines, without the final empty one. */
  readonly lines: string[];
}

/** A `sluice` process still running. */
interface RunningCli {
  /** What it printed on stdout so far. */
  stdout(): string;
  /** Sends a signal (Ctrl-C is SIGINT). */
  kill(signal: NodeJS.Signals): void;
  /** Resolves when it has exited. */
  readonly done: Promise<CliRun>;
}

/**
 * Starts `sluice <args>` as a child process with only PATH, the gateway's address and (unless
 * `env` says otherwise) the tenant's key in its environment; kills it after `timeoutMs`.
 */
function startSluice(
  args: readonly string[],
  { env, timeoutMs = 60_000 }: { env?: Record<string, string>; timeoutMs?: number } = {},
): RunningCli {
  const child = spawn(process.execPath, [SLUICE_BIN, ...args], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      SLUICE_ADDRESS: stack.grpcAddress,
      SLUICE_API_KEY: apiKey,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<CliRun>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sluice ${args.join(' ')} ran over ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, lines: stdout.split('\n').filter((l) => l !== '') });
    });
  });
  return { stdout: () => stdout, kill: (signal) => child.kill(signal), done };
}

/** Runs `sluice <args>` to its end (see {@link startSluice}). */
function sluice(
  args: readonly string[],
  options: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliRun> {
  return startSluice(args, options).done;
}

/** Waits until `cli` has printed a line matching `pattern` (deadline 30 s). */
async function waitForOutput(cli: RunningCli, pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!pattern.test(cli.stdout())) {
    if (Date.now() > deadline) assert.fail(`no output matching ${pattern}:\n${cli.stdout()}`);
    await delay(50);
  }
}

/** Asserts the exit code, showing the output when it differs. */
function assertExit(run: CliRun, code: number) {
  assert.equal(
    run.code,
    code,
    `exit code ${run.code}, expected ${code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`,
  );
}

/** The value of a `label  value` line of `sluice get`. */
function field(text: string, label: string): string | undefined {
  return text
    .split('\n')
    .find((line) => line.startsWith(`${label} `))
    ?.slice(10);
}

function stepsInput(label = 'q1', pages = 3) {
  return JSON.stringify({ label, pages });
}

/** Creates a task through the CLI (`--json`) and returns it. */
async function createWithCli(type: string, input: string, extra: string[] = []): Promise<Task> {
  const run = await sluice(['create', type, '--input', input, '--json', ...extra]);
  assertExit(run, 0);
  return (JSON.parse(run.stdout) as { task: Task }).task;
}

/** Waits, through WatchTask, until the task's events reach `status` (deadline 60 s). */
async function waitForStatus(taskId: string, status: TaskStatus): Promise<void> {
  for await (const event of client.watchTask(taskId, 0, AbortSignal.timeout(60_000))) {
    if (event.to_status === status) return;
  }
  const { task } = await client.getTask(taskId);
  assert.equal(task.status, status, `task ${taskId} reached ${status}`);
}

describe('sluice create, get, watch and list', () => {
  let succeeded: Task;

  it('create --watch follows a task live to succeeded and exits 0', async () => {
    const run = await sluice([
      'create',
      'cli-steps',
      '--input',
      stepsInput(),
      '--priority',
      'P1',
      '--idempotency-key',
      'cli-first',
      '--watch',
    ]);
    assertExit(run, 0);
    const [first, ...events] = run.lines;
    const id = UUID.exec(first ?? '')?.[0];
    assert.ok(id, `the first line names the task: ${first}`);
    assert.equal(first, `created task ${id} (cli-steps, P1, queued)`);
    // One line per event, in sequence from #1, then how it ended.
    const eventLines = events.slice(0, -1);
    assert.deepEqual(
      eventLines.map((line) => /#(\d+)/.exec(line)?.[1]),
      eventLines.map((_, i) => String(i + 1)),
      run.stdout,
    );
    assert.match(eventLines[0] ?? '', /^\d\d:\d\d:\d\dZ {2}#1 +queued +create\b/);
    assert.ok(
      eventLines.some((line) =>
        / running +step_progress +draft +50% "drafting 3 pages"$/.test(line),
      ),
      run.stdout,
    );
    assert.ok(
      eventLines.some((line) => / running +start +draft\b/.test(line)),
      run.stdout,
    );
    assert.match(eventLines.at(-1) ?? '', / succeeded +complete\b/);
    assert.match(
      events.at(-1) ?? '',
      new RegExp(`^task ${id} succeeded after .*; its output: sluice get ${id}$`),
    );
    succeeded = (await client.getTask(id)).task;
    assert.equal(succeeded.status, 'TASK_STATUS_SUCCEEDED');
  });

  it('create with a used idempotency key says it created nothing', async () => {
    const run = await sluice([
      'create',
      'cli-steps',
      '--input',
      stepsInput(),
      '--priority',
      'P1',
      '--idempotency-key',
      'cli-first',
    ]);
    assertExit(run, 0);
    assert.match(
      run.stdout,
      new RegExp(
        `^task ${succeeded.task_id} already exists for idempotency key "cli-first" .*nothing was created`,
      ),
    );
  });

  it('create reads the input from a file', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sluice-cli-'));
    try {
      const file = path.join(dir, 'input.json');
      await writeFile(file, '{\n  "label": "from a file"\n}\n');
      const run = await sluice(['create', 'cli-held', '--input-file', file, '--json']);
      assertExit(run, 0);
      const { task } = JSON.parse(run.stdout) as { task: Task };
      assert.deepEqual(JSON.parse(task.input), { label: 'from a file' });
      assertExit(await sluice(['cancel', task.task_id]), 0);
      const missing = await sluice(['create', 'cli-held', '--input-file', path.join(dir, 'nope')]);
      assertExit(missing, 2);
      assert.match(missing.stderr, /^error: cannot read --input-file .*nope: ENOENT/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('create --inputs-file makes a task per line, and a rerun with the same key none', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'sluice-cli-'));
    try {
      const file = path.join(dir, 'inputs.jsonl');
      await writeFile(file, '{"label": "one"}\n\n{"label": "two"}\n{"label": "three"}\n');
      const args = ['create', 'cli-held', '--inputs-file', file, '--idempotency-key', 'cli-batch'];
      const first = await sluice(args);
      assertExit(first, 0);
      assert.deepEqual(
        first.lines.map((l) => l.replace(/task \S+/, 'task <id>')),
        ['line 1: created task <id>', 'line 3: created task <id>', 'line 4: created task <id>'],
      );
      assert.match(first.stderr, /created 3 of 3 tasks/);
      const again = await sluice([...args, '--json']);
      assertExit(again, 0);
      const repeats = again.lines.map(
        (l) => JSON.parse(l) as { line: number; created: boolean; task: Task },
      );
      assert.deepEqual(
        repeats.map((r): unknown[] => [r.line, r.created, JSON.parse(r.task.input)]),
        [
          [1, false, { label: 'one' }],
          [3, false, { label: 'two' }],
          [4, false, { label: 'three' }],
        ],
      );
      for (const { task } of repeats) assertExit(await sluice(['cancel', task.task_id]), 0);
      // A bad line refuses its batch; the error names the line of the file.
      await writeFile(file, '{"label": "fine"}\n{"label": 42}\n');
      const bad = await sluice(['create', 'cli-held', '--inputs-file', file]);
      assertExit(bad, 1);
      assert.match(bad.stderr, /^error: INVALID_ARGUMENT: line 2: input\.label/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('get shows the task for people', async () => {
    const run = await sluice(['get', succeeded.task_id]);
    assertExit(run, 0);
    assert.equal(field(run.stdout, 'task'), succeeded.task_id);
    assert.equal(field(run.stdout, 'type'), 'cli-steps (version 1)');
    assert.equal(field(run.stdout, 'priority'), 'P1');
    assert.equal(field(run.stdout, 'state'), 'succeeded');
    assert.equal(field(run.stdout, 'attempt'), '1');
    assert.equal(field(run.stdout, 'trace'), succeeded.trace_id);
    assert.equal(field(run.stdout, 'cancel'), 'not possible');
    assert.match(
      field(run.stdout, 'finished') ?? '',
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(.* after creation\)$/,
    );
    // The output, pretty-printed (Postgres keeps JSON objects with their keys in its own order).
    assert.match(run.stdout, /^output {4}\{$/m);
    assert.match(run.stdout, /^ {12}"title": "Report q1",?$/m);
    assert.match(run.stdout, /^ {12}"pages": 3,?$/m);
  });

  it('get --json prints the GetTask response', async () => {
    const run = await sluice(['get', succeeded.task_id, '--json']);
    assertExit(run, 0);
    const { task } = JSON.parse(run.stdout) as { task: Task };
    assert.equal(task.task_id, succeeded.task_id);
    assert.equal(task.status, 'TASK_STATUS_SUCCEEDED');
    assert.equal(task.last_event_seq, succeeded.last_event_seq);
  });

  it('watch replays the history of a finished task and exits 0', async () => {
    const last = Number(succeeded.last_event_seq);
    const run = await sluice(['watch', succeeded.task_id]);
    assertExit(run, 0);
    assert.equal(run.lines.length, last + 1, run.stdout);
    assert.match(run.lines.at(-1) ?? '', new RegExp(`^task ${succeeded.task_id} succeeded`));

    const json = await sluice(['watch', succeeded.task_id, '--json']);
    assertExit(json, 0);
    const events = json.lines.map((line) => JSON.parse(line) as TaskEvent);
    assert.deepEqual(
      events.map((e) => Number(e.seq)),
      Array.from({ length: last }, (_, i) => i + 1),
    );
    assert.equal(events.at(-1)?.to_status, 'TASK_STATUS_SUCCEEDED');

    const tail = await sluice(['watch', succeeded.task_id, '--after', String(last - 1), '--json']);
    assertExit(tail, 0);
    assert.deepEqual(
      tail.lines.map((line) => (JSON.parse(line) as TaskEvent).seq),
      [String(last)],
    );
  });

  it('watch exits 1 when the task fails, with its error and how to retry', async () => {
    const task = await createWithCli('cli-fails', '{"label":"boom"}');
    const run = await sluice(['watch', task.task_id]);
    assertExit(run, 1);
    assert.match(run.stdout, / failed_terminal +fail_terminal\b/);
    assert.match(
      run.lines.at(-1) ?? '',
      new RegExp(
        `^task ${task.task_id} failed after .*: schema_validation: .*; retry it: sluice retry ${task.task_id}$`,
      ),
    );
    const get = await sluice(['get', task.task_id]);
    assert.match(field(get.stdout, 'error') ?? '', /^schema_validation: /);
    assert.equal(
      field(get.stdout, 'retry'),
      `sluice retry ${task.task_id}  (steps that succeeded are not run again)`,
    );
  });

  it('list shows tasks newest first, filters them and pages through them', async () => {
    const held = await createWithCli('cli-held', '{"label":"list"}', ['--priority', 'P3']);
    const table = await sluice(['list']);
    assertExit(table, 0);
    assert.match(table.lines[0] ?? '', /^TASK +TYPE +PRI +STATE +STEP +PROGRESS +CREATED$/);
    assert.match(
      table.lines[1] ?? '',
      new RegExp(`^${held.task_id}  cli-held +P3 +queued +hold\\b`),
    );
    assert.ok(table.lines.some((line) => line.startsWith(`${succeeded.task_id}  cli-steps`)));

    const filtered = await sluice([
      'list',
      '--status',
      'succeeded',
      '--type',
      'cli-steps',
      '--json',
    ]);
    assertExit(filtered, 0);
    const { tasks } = JSON.parse(filtered.stdout) as { tasks: Task[] };
    assert.deepEqual(
      tasks.map((t) => t.task_id),
      [succeeded.task_id],
    );

    const byPriority = await sluice(['list', '--priority', 'p3', '--json']);
    assert.ok(
      (JSON.parse(byPriority.stdout) as { tasks: Task[] }).tasks.every(
        (t) => t.priority === 'PRIORITY_P3',
      ),
    );

    const one = await sluice(['list', '--limit', '1']);
    assertExit(one, 0);
    assert.equal(one.lines.length, 2, 'a header and one task');
    assert.match(one.stderr, /more tasks: raise --limit or pass --all/);

    const all = await sluice(['list', '--all', '--json']);
    const every = JSON.parse(all.stdout) as { tasks: Task[]; next_page_token: string };
    assert.equal(every.next_page_token, '');
    assert.ok(every.tasks.length >= 3);
    assert.equal(new Set(every.tasks.map((t) => t.task_id)).size, every.tasks.length);
  });
});

describe('sluice reports refusals with the gRPC status and exit codes', () => {
  it('cancel of a finished task: exit 1, error: FAILED_PRECONDITION', async () => {
    const task = await createWithCli('cli-steps', stepsInput('q2'));
    await waitForStatus(task.task_id, 'TASK_STATUS_SUCCEEDED');
    const run = await sluice(['cancel', task.task_id, '--reason', 'too late']);
    assertExit(run, 1);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /^error: FAILED_PRECONDITION: \S.*\n$/);
    assert.equal((await client.getTask(task.task_id)).task.status, 'TASK_STATUS_SUCCEEDED');
  });

  it('no API key: exit 2 with a message saying how to give one', async () => {
    const run = await sluice(['get', '0f8f2f4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f'], {
      env: { SLUICE_API_KEY: '' },
    });
    assertExit(run, 2);
    assert.match(run.stderr, /^error: no API key: pass --api-key <key> or set SLUICE_API_KEY/);
  });

  it('an unknown key: exit 1, error: UNAUTHENTICATED', async () => {
    const run = await sluice(['list', '--api-key', 'slk_not_a_key']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: UNAUTHENTICATED: /);
  });

  it('input that is not JSON: exit 1, error: INVALID_ARGUMENT naming the field', async () => {
    const run = await sluice(['create', 'cli-steps', '--input', '{"label": ']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: INVALID_ARGUMENT: input: /);
  });

  it('input that misses a field: exit 1, error: INVALID_ARGUMENT naming input.label', async () => {
    const run = await sluice(['create', 'cli-steps', '--input', JSON.stringify({ pages: 2 })]);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: INVALID_ARGUMENT: input\.label: /);
  });

  it('an unknown task: exit 1, error: NOT_FOUND', async () => {
    const run = await sluice(['get', '0f8f2f4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: NOT_FOUND: /);
  });

  it('a command line mistake: exit 2 with the usage, nothing sent', async () => {
    const run = await sluice(['create', 'cli-steps', '--priority', 'P9', '--input', '{}']);
    assertExit(run, 2);
    assert.match(
      run.stderr,
      /^error: --priority must be one of P0, P1, P2, P3 \(got "P9"\)\nusage: sluice create <type>/,
    );
    const noInput = await sluice(['create', 'cli-steps']);
    assertExit(noInput, 2);
    assert.match(
      noInput.stderr,
      /exactly one of --input <json>, --input-file <file> or --inputs-file <file>/,
    );
  });

  it('no gateway at the address: exit 1, error: UNAVAILABLE and a hint', async () => {
    const run = await sluice(['list', '--address', '127.0.0.1:1']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: UNAVAILABLE: .*\nis the gateway running at 127\.0\.0\.1:1\?/);
  });
});

describe('sluice cancel, pause, resume and retry', () => {
  it('cancels a queued task; watch then exits 1', async () => {
    const task = await createWithCli('cli-held', '{"label":"cancel"}');
    const get = await sluice(['get', task.task_id]);
    assert.equal(field(get.stdout, 'state'), 'queued');
    assert.ok(field(get.stdout, 'queue'), 'a queued task shows its queue standing');
    const run = await sluice(['cancel', task.task_id, '--reason', 'not needed']);
    assertExit(run, 0);
    assert.equal(run.stdout, `cancelled task ${task.task_id}\n`);
    const watch = await sluice(['watch', task.task_id]);
    assertExit(watch, 1);
    assert.match(watch.stdout, / cancelled +cancel +.*reason "not needed"/);
    assert.match(watch.lines.at(-1) ?? '', new RegExp(`^task ${task.task_id} was cancelled`));
  });

  it('watch follows a live task until it is cancelled, then exits 1', async () => {
    const { task_id: id } = await createWithCli('cli-held', '{"label":"live"}');
    const watch = startSluice(['watch', id]);
    await waitForOutput(watch, / #1 +queued +create +hold +next in line · /);
    assertExit(await sluice(['cancel', id, '--reason', 'seen enough']), 0);
    const run = await watch.done;
    assertExit(run, 1);
    assert.equal(run.lines.length, 3, run.stdout);
    assert.match(run.lines[1] ?? '', / #2 +cancelled +cancel +- +reason "seen enough"$/);
    assert.match(run.lines[2] ?? '', new RegExp(`^task ${id} was cancelled after `));
  });

  it('watch stops on Ctrl-C with exit code 130', async () => {
    const { task_id: id } = await createWithCli('cli-held', '{"label":"interrupted"}');
    const watch = startSluice(['watch', id]);
    await waitForOutput(watch, / #1 +queued +create /);
    watch.kill('SIGINT');
    const run = await watch.done;
    assertExit(run, 130);
    assert.equal((await client.getTask(id)).task.status, 'TASK_STATUS_QUEUED', 'the task goes on');
    await sluice(['cancel', id]);
  });

  it('pauses and resumes a queued task', async () => {
    const task = await createWithCli('cli-held', '{"label":"pause"}');
    const pause = await sluice(['pause', task.task_id]);
    assertExit(pause, 0);
    assert.equal(
      pause.stdout,
      `paused task ${task.task_id}; resume it: sluice resume ${task.task_id}\n`,
    );
    const get = await sluice(['get', task.task_id]);
    assert.equal(field(get.stdout, 'state'), 'paused');
    assert.equal(field(get.stdout, 'resume'), `sluice resume ${task.task_id}`);

    const again = await sluice(['pause', task.task_id]);
    assertExit(again, 1);
    assert.match(again.stderr, /^error: FAILED_PRECONDITION: /);

    const resume = await sluice(['resume', task.task_id]);
    assertExit(resume, 0);
    assert.equal(resume.stdout, `resumed task ${task.task_id} (now queued)\n`);
    const resumeAgain = await sluice(['resume', task.task_id]);
    assertExit(resumeAgain, 1);
    assert.match(resumeAgain.stderr, /^error: FAILED_PRECONDITION: /);
    await sluice(['cancel', task.task_id]);
  });

  it('retries a cancelled task as a new attempt', async () => {
    const task = await createWithCli('cli-held', '{"label":"retry"}');
    assertExit(await sluice(['cancel', task.task_id]), 0);
    const retry = await sluice(['retry', task.task_id]);
    assertExit(retry, 0);
    assert.equal(retry.stdout, `retrying task ${task.task_id}: attempt 2 (now queued)\n`);
    const { task: after } = JSON.parse((await sluice(['get', task.task_id, '--json'])).stdout) as {
      task: Task;
    };
    assert.equal(after.status, 'TASK_STATUS_QUEUED');
    assert.equal(after.attempt, 2);
    await sluice(['cancel', task.task_id]);
  });

  it('refuses to retry a task that succeeded', async () => {
    const task = await createWithCli('cli-steps', stepsInput());
    await waitForStatus(task.task_id, 'TASK_STATUS_SUCCEEDED');
    const run = await sluice(['retry', task.task_id]);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: FAILED_PRECONDITION: /);
  });
});

describe('sluice approve and reject', () => {
  it('get shows the pending approval; approve continues the task to succeeded', async () => {
    const { task_id: id } = await createWithCli('cli-approval', '{"label":"q3"}');
    await waitForStatus(id, 'TASK_STATUS_WAITING_APPROVAL');
    const get = await sluice(['get', id]);
    assertExit(get, 0);
    assert.equal(field(get.stdout, 'state'), 'waiting_approval');
    assert.equal(field(get.stdout, 'approval'), approvalPrompt('q3'));
    assert.equal(field(get.stdout, 'asked by'), 'step ask');
    assert.match(
      field(get.stdout, 'deadline') ?? '',
      /Z \(in \d+m \d\ds\); then the task is cancelled$/,
    );
    assert.equal(field(get.stdout, 'answer'), `sluice approve ${id} [--comment <text>]`);

    const approve = await sluice(['approve', id, '--comment', 'looks good']);
    assertExit(approve, 0);
    assert.equal(approve.stdout, `approved task ${id} (now running)\n`);
    const watch = await sluice(['watch', id]);
    assertExit(watch, 0);
    assert.match(watch.stdout, / approve +.*comment "looks good"/);
    assert.match(watch.lines.at(-1) ?? '', new RegExp(`^task ${id} succeeded`));

    const again = await sluice(['approve', id]);
    assertExit(again, 1);
    assert.match(again.stderr, /^error: FAILED_PRECONDITION: /);
  });

  it('reject cancels the task with the comment as reason; watch then exits 1', async () => {
    const { task_id: id } = await createWithCli('cli-approval', '{"label":"q4"}');
    await waitForStatus(id, 'TASK_STATUS_WAITING_APPROVAL');
    const reject = await sluice(['reject', id, '--comment', 'numbers are off']);
    assertExit(reject, 0);
    assert.equal(reject.stdout, `rejected task ${id} (now cancelled)\n`);
    const watch = await sluice(['watch', id]);
    assertExit(watch, 1);
    assert.match(watch.stdout, / cancelled +reject +.*comment "numbers are off"/);
  });

  it('refuses to approve a task that is not waiting for approval', async () => {
    const { task_id: id } = await createWithCli('cli-held', '{"label":"not waiting"}');
    const run = await sluice(['approve', id]);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: FAILED_PRECONDITION: /);
    await sluice(['cancel', id]);
  });
});

describe('sluice tenants and keys (admin)', () => {
  const asAdmin = { env: { SLUICE_API_KEY: '' } };
  const admin = (args: string[]) => sluice([...args, '--api-key', adminKey], asAdmin);

  it('creates a tenant, gives it a key that works, lists and revokes it', async () => {
    const created = await admin(['tenants', 'create', 'cli-new', '--name', 'New Co']);
    assertExit(created, 0);
    assert.equal(
      created.stdout,
      'created tenant cli-new ("New Co"); give it a key: sluice keys create cli-new\n',
    );
    const again = await admin(['tenants', 'create', 'cli-new']);
    assertExit(again, 1);
    assert.match(again.stderr, /^error: ALREADY_EXISTS: /);

    const tenants = await admin(['tenants', 'list']);
    assertExit(tenants, 0);
    assert.match(tenants.lines[0] ?? '', /^TENANT +CREATED +NAME$/);
    assert.ok(
      tenants.lines.some((line) => /^cli-new +\S+Z +New Co$/.test(line)),
      tenants.stdout,
    );

    // Only the secret on stdout, so that KEY=$(sluice keys create …) works.
    const key = await admin(['keys', 'create', 'cli-new']);
    assertExit(key, 0);
    assert.equal(key.lines.length, 1);
    const secret = key.lines[0] ?? '';
    const keyId = UUID.exec(key.stderr)?.[0];
    assert.ok(keyId, key.stderr);
    assert.match(
      key.stderr,
      /^created key \S+ \(slk_[\w-]{6}…\) for tenant cli-new; its secret is shown only now:/,
    );
    const asNewTenant = await sluice(['list', '--api-key', secret], asAdmin);
    assertExit(asNewTenant, 0);
    assert.equal(asNewTenant.stdout, 'no tasks\n', 'a new tenant sees none of the other tasks');

    const keys = await admin(['keys', 'list', 'cli-new']);
    assertExit(keys, 0);
    assert.match(
      keys.lines[1] ?? '',
      new RegExp(`^${keyId}  slk_[\\w-]{6} +tenant +\\S+Z +valid$`),
    );

    const revoke = await admin(['keys', 'revoke', keyId]);
    assertExit(revoke, 0);
    assert.match(
      revoke.stdout,
      new RegExp(`^revoked key ${keyId} \\(slk_[\\w-]{6}…\\) of tenant cli-new\n$`),
    );
    const revoked = await sluice(['list', '--api-key', secret], asAdmin);
    assertExit(revoked, 1);
    assert.match(revoked.stderr, /^error: UNAUTHENTICATED: /);
    const after = await admin(['keys', 'list', 'cli-new', '--json']);
    const { keys: listed } = JSON.parse(after.stdout) as {
      keys: { key_id: string; revoke_time: unknown }[];
    };
    assert.deepEqual(
      listed.map((k) => [k.key_id, k.revoke_time !== null]),
      [[keyId, true]],
    );
  });

  it('refuses a tenant key: exit 1, error: PERMISSION_DENIED', async () => {
    const run = await sluice(['tenants', 'list']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: PERMISSION_DENIED: /);
  });

  it('keys create for an unknown tenant: exit 1, error: NOT_FOUND', async () => {
    const run = await admin(['keys', 'create', 'no-such-tenant']);
    assertExit(run, 1);
    assert.match(run.stderr, /^error: NOT_FOUND: /);
  });
});

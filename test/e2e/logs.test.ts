/**
 * Logs that join traces, and no secret in them (issue 6, "done when" 3). The stack runs with its
 * ordinary configuration (no trace exporter: spans are still made, so their ids reach the logs),
 * and the test reads back what the services printed:
 * - the lines a step logs through `ctx.logger` carry the task's trace id (the one `GetTask`
 *   reports), the span id of that step's attempt, the task id and the service name; a debug line
 *   is not written at the configured level (`SLUICE_LOG_LEVEL=info`);
 * - neither the tenant's API key nor the LLM key appears in any line of any service, after a call
 *   with a wrong API key (UNAUTHENTICATED) and a step whose model call is answered 401.
 * The same secret check runs when any e2e stack stops (test/support/secrets.ts), so every e2e file
 * of the suite enforces it; this file makes sure the occasions for a leak actually happen.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Task } from '@sluice/api';
import { createTaskClient } from '@sluice/sdk/client';
import { startE2eStack, type E2eStack } from '../support/e2e-stack.js';
import { startFakeLlmServer, type FakeLlmServer } from '../support/fake-llm-server.js';
import { findSecretLeaks, registerSecret, registeredSecrets } from '../support/secrets.js';
import type { LogLine } from '../support/service-process.js';
import { LOGS_MESSAGES } from './logs-task-types.js';

const TASK_MODULE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'logs-task-types.ts');
/** A fresh key per run, long enough that finding it can only mean it leaked. */
const LLM_KEY = `sk-logs-${randomBytes(12).toString('hex')}`;
/** An API key of the right shape that no tenant has. */
const WRONG_KEY = `slk_${randomBytes(24).toString('base64url')}`;
const EXECUTOR = 'executor-llm';

let llm: FakeLlmServer;
let e2e: E2eStack;
let succeeded: Task;
let refused: Task;
let wrongKeyStatus: number | undefined;

/** Runs a task of `lg-logged` to its end and returns it as `GetTask` answers. */
async function runTask(topic: string): Promise<Task> {
  const { task } = await e2e.client.createTask({
    type: 'lg-logged',
    priority: 'PRIORITY_P1',
    input: { topic },
  });
  // The stream ends when the task is final.
  for await (const event of e2e.client.watchTask(task.task_id, 0, AbortSignal.timeout(60_000))) {
    void event;
  }
  return (await e2e.client.getTask(task.task_id)).task;
}

before(async () => {
  llm = await startFakeLlmServer({ apiKey: LLM_KEY });
  e2e = await startE2eStack({
    label: 'logs',
    resources: ['llm'],
    llmBaseUrl: llm.baseUrl,
    llmApiKey: LLM_KEY,
    env: { SLUICE_TASK_MODULES: TASK_MODULE, SLUICE_SCHEDULER_POLL_MS: '100' },
  });

  // A call with a key no tenant has.
  registerSecret(WRONG_KEY, 'wrong API key');
  const stranger = createTaskClient({ address: e2e.stack.grpcAddress, apiKey: WRONG_KEY });
  try {
    await stranger.createTask({
      type: 'lg-logged',
      priority: 'PRIORITY_P1',
      input: { topic: 'x' },
    });
  } catch (error) {
    wrongKeyStatus = (error as { code?: number }).code;
  } finally {
    stranger.close();
  }

  succeeded = await runTask('queues');
  llm.failNext({ status: 401 });
  refused = await runTask('credentials');
});

after(async () => {
  // Throws when a service printed a secret (test/support/secrets.ts).
  await e2e?.stop();
  await llm?.stop();
});

/** The executor's lines of one task with the message `msg`. */
function linesOf(task: Task, msg: string): LogLine[] {
  const executor = e2e.stack.executors.get('llm');
  assert.ok(executor, 'the llm executor runs');
  return executor.lines.filter((line) => line.task_id === task.task_id && line.msg === msg);
}

function only(lines: LogLine[], what: string): LogLine {
  assert.equal(lines.length, 1, `exactly one line ${what}`);
  const [line] = lines;
  assert.ok(line);
  return line;
}

describe('the log lines of a step', () => {
  it('carry the task trace id GetTask reports, the step span id, the task id and the service', () => {
    assert.equal(succeeded.status, 'TASK_STATUS_SUCCEEDED', `the task ended ${succeeded.status}`);
    assert.match(succeeded.trace_id, /^[0-9a-f]{32}$/);
    const note = only(linesOf(succeeded, LOGS_MESSAGES.note), 'of the note step');
    const asking = only(linesOf(succeeded, LOGS_MESSAGES.asking), 'before the model call');
    const answered = only(linesOf(succeeded, LOGS_MESSAGES.answered), 'after the model call');
    for (const line of [note, asking, answered]) {
      assert.equal(line.trace_id, succeeded.trace_id, `trace id of ${JSON.stringify(line)}`);
      assert.match(String(line.span_id), /^[0-9a-f]{16}$/);
      assert.equal(line.service, EXECUTOR);
      assert.equal(line.level, 'info');
    }
    assert.equal(note.step, 'note');
    assert.equal(note.topic, 'queues');
    assert.equal(asking.step, 'ask');
    // Each step attempt is a span of its own; the lines of one attempt share it, across the
    // model call.
    assert.notEqual(note.span_id, asking.span_id);
    assert.equal(asking.span_id, answered.span_id);
  });

  it("include the executor's own lines about the step, in the task's trace", () => {
    const finished = linesOf(succeeded, 'step finished');
    assert.ok(finished.length >= 2, 'one per step');
    for (const line of finished) {
      assert.equal(line.trace_id, succeeded.trace_id, `trace id of ${JSON.stringify(line)}`);
      assert.match(String(line.span_id), /^[0-9a-f]{16}$/);
    }
  });

  it('of another task carry that task trace id', () => {
    assert.notEqual(refused.trace_id, succeeded.trace_id);
    const asking = only(linesOf(refused, LOGS_MESSAGES.asking), 'before the refused call');
    assert.equal(asking.trace_id, refused.trace_id);
  });

  it('are written at the configured level only (SLUICE_LOG_LEVEL=info: no debug line)', () => {
    assert.equal(linesOf(succeeded, LOGS_MESSAGES.note).length, 1);
    assert.deepEqual(linesOf(succeeded, LOGS_MESSAGES.noteDebug), []);
  });

  it('of every service are JSON with a service name', () => {
    for (const process of e2e.stack.all) {
      assert.ok(process.lines.length > 0, `${process.options.name} logged`);
      const notJson = process.lines.filter((line) => line.raw !== undefined);
      assert.deepEqual(notJson, [], `${process.options.name} wrote only JSON lines`);
      assert.ok(
        process.lines.every((line) => typeof line.service === 'string' && line.service !== ''),
        `${process.options.name} names itself on every line`,
      );
    }
  });
});

describe('no secret in any output', () => {
  it('the occasions for a leak happened: a wrong key was refused, the model answered 401', () => {
    assert.equal(wrongKeyStatus, grpcStatus.UNAUTHENTICATED);
    assert.equal(refused.status, 'TASK_STATUS_FAILED_TERMINAL', `the task ended ${refused.status}`);
    assert.equal(refused.error?.error_class, 'ERROR_CLASS_PERMISSION_DENIED');
    // The executor logged the failed step, error and all.
    const failed = linesOf(refused, 'step failed');
    assert.equal(failed.length, 1, 'the refused step was logged');
  });

  it('neither the tenant key, the wrong key nor the LLM key appears in any line of any service', () => {
    const secrets = registeredSecrets().map((s) => s.value);
    for (const secret of [e2e.apiKey, WRONG_KEY, LLM_KEY]) assert.ok(secrets.includes(secret));
    for (const process of e2e.stack.all) {
      const text = [...process.stdout, ...process.stderr].join('\n');
      assert.ok(process.stdout.length > 0);
      for (const secret of [e2e.apiKey, WRONG_KEY, LLM_KEY]) {
        assert.ok(!text.includes(secret), `${process.options.name} printed ${secret.slice(0, 6)}…`);
      }
      assert.deepEqual(findSecretLeaks(process), [], `${process.options.name} leaked`);
    }
  });
});

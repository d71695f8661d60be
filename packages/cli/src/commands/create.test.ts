import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CreateTaskParams, TaskClient } from '@sluice/sdk/client';
import { runCli, type CliEnvironment } from '../main.js';
import { taskWith } from '../test-fixtures.js';

/** Runs `sluice` against a task client that records its creates. */
async function run(argv: string[]) {
  const creates: CreateTaskParams[] = [];
  const lines: string[] = [];
  const client = {
    createTask: (params: CreateTaskParams) => {
      creates.push(params);
      return Promise.resolve({ task: taskWith(), created: true });
    },
    close: () => undefined,
  } as unknown as TaskClient;
  const environment: Partial<CliEnvironment> = {
    env: { SLUICE_API_KEY: 'sk_test' },
    output: { out: (line) => lines.push(line), err: (line) => lines.push(line) },
    signal: new AbortController().signal,
    createTaskClient: () => client,
  };
  const code = await runCli(argv, environment);
  return { code, creates, lines };
}

describe('sluice create', () => {
  it('sends the idempotency key it is given', async () => {
    const { code, creates } = await run([
      'create',
      'brief',
      '--input',
      '{}',
      '--idempotency-key',
      'k1',
    ]);
    assert.equal(code, 0);
    assert.equal(creates[0]?.idempotencyKey, 'k1');
  });

  it('refuses an empty idempotency key instead of creating a task without one', async () => {
    // `--idempotency-key "$KEY"` with KEY unset: the caller asked for a repeat-safe create, and a
    // rerun must not create the task again.
    const { code, creates, lines } = await run([
      'create',
      'brief',
      '--input',
      '{}',
      '--idempotency-key=',
    ]);
    assert.deepEqual(creates, []);
    assert.equal(code, 2);
    assert.match(lines.join('\n'), /--idempotency-key must not be empty/);
  });
});

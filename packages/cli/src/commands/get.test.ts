import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { TaskClient } from '@sluice/sdk/client';
import { runCli, type CliEnvironment } from '../main.js';
import { TASK_ID, taskWith } from '../test-fixtures.js';

describe('sluice get', () => {
  it('shows control characters of task text visibly instead of sending them to the terminal', async () => {
    // A step's error and approval prompt carry what a web page or a model wrote: escape sequences
    // that clear the screen, set the window title or rewrite the line (CR) must not act.
    const task = taskWith({
      status: 'TASK_STATUS_WAITING_APPROVAL',
      error: {
        error_class: 'ERROR_CLASS_EXTERNAL_5XX',
        message: 'bad gateway\u001b[2J\u001b]0;owned\u0007',
        retryable: true,
      },
      approval: {
        prompt: 'Publish?\rApproved already, just approve\u009b31m',
        step: 'review',
        deadline: null,
        on_timeout: 'APPROVAL_TIMEOUT_ACTION_UNSPECIFIED',
      },
    });
    let lines: string[] = [];
    const environment: Partial<CliEnvironment> = {
      env: { SLUICE_API_KEY: 'sk_test' },
      output: { out: (line) => lines.push(line), err: (line) => lines.push(line) },
      signal: new AbortController().signal,
      createTaskClient: () =>
        ({
          getTask: () => Promise.resolve({ task }),
          close: () => undefined,
        }) as unknown as TaskClient,
    };
    assert.equal(await runCli(['get', TASK_ID], environment), 0);
    const text = lines.join('\n');
    assert.deepEqual(text.match(/[^\P{Cc}\n]/gu), null, 'no control character but line feeds');
    assert.match(text, /bad gateway\\u001b\[2J\\u001b\]0;owned\\u0007/);
    assert.match(text, /Publish\?\\u000dApproved already/);

    // --json keeps the same text: the escape means the same character to a JSON reader.
    lines = [];
    assert.equal(await runCli(['get', TASK_ID, '--json'], environment), 0);
    const json = lines.join('\n');
    assert.deepEqual(json.match(/[^\P{Cc}\n]/gu), null);
    assert.deepEqual((JSON.parse(json) as { task: unknown }).task, task);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import type { TaskEvent } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import { runCli, type CliEnvironment } from '../main.js';
import { TASK_ID } from '../test-fixtures.js';

/** An error as grpc-js reports a refused or failed call. */
function serviceError(code: grpcStatus, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${grpcStatus[code]}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
}

/** A stream that yields nothing and ends only when the watch is aborted: a silent gateway. */
function silentStream(signal: AbortSignal | undefined): AsyncIterable<TaskEvent> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () =>
        new Promise<IteratorResult<TaskEvent>>((resolve) =>
          signal?.addEventListener('abort', () => resolve({ done: true, value: undefined })),
        ),
    }),
  };
}

/** Runs `sluice argv` against `client`, gives up after `withinMs` (aborting a watch then). */
async function run(argv: string[], client: Partial<TaskClient>, withinMs = 2_000) {
  const lines: string[] = [];
  const interrupt = new AbortController();
  const environment: Partial<CliEnvironment> = {
    env: { SLUICE_API_KEY: 'sk_test', SLUICE_ADDRESS: 'gw.example:50051' },
    output: { out: (line) => lines.push(line), err: (line) => lines.push(line) },
    signal: interrupt.signal,
    createTaskClient: () => ({ close: () => undefined, ...client }) as TaskClient,
  };
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'still running'>((resolve) => {
    timer = setTimeout(() => resolve('still running'), withinMs);
  });
  const running = runCli(argv, environment);
  const code = await Promise.race([running, gaveUp]);
  clearTimeout(timer);
  interrupt.abort();
  await running;
  return { code, text: lines.join('\n') };
}

describe('sluice watch', () => {
  it('--json reports a gateway that does not answer instead of waiting for good', async () => {
    // The gateway accepts the connection and never answers: a unary call runs into its deadline,
    // a stream (which has none) waits for ever.
    const { code, text } = await run(['watch', TASK_ID, '--json'], {
      getTask: () =>
        Promise.reject(serviceError(grpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded')),
      watchTask: (_id, _after, signal) => silentStream(signal),
    });
    assert.equal(code, 1);
    assert.match(text, /DEADLINE_EXCEEDED/);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import type { Task, TaskEvent } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import { runCli, type CliEnvironment } from '../main.js';
import { TASK_ID, eventWith, taskWith } from '../test-fixtures.js';

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

/** A stream the gateway breaks off before any event, e.g. when it shuts down for a restart. */
function brokenStream(): AsyncIterable<TaskEvent> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () =>
        Promise.reject(serviceError(grpcStatus.UNAVAILABLE, 'the server is shutting down')),
    }),
  };
}

/** A stream of these events, then its end (the task is final). */
function streamOf(events: readonly TaskEvent[]): AsyncIterable<TaskEvent> {
  return {
    [Symbol.asyncIterator]: () => {
      let next = 0;
      return {
        next: () => {
          const value = events[next++];
          return Promise.resolve<IteratorResult<TaskEvent>>(
            value === undefined ? { done: true, value: undefined } : { done: false, value },
          );
        },
      };
    },
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
    // grpc-js's own words ("Waiting for LB pick") do not say what to check.
    assert.match(text, /the gateway at gw\.example:50051 did not answer in time/);
  });

  it('reconnects when the gateway restarts before the first new event', async () => {
    // Watching from the latest event (--after 1), nothing new has been streamed when the gateway
    // goes away; the watch resumes on the restarted one and sees the task finish.
    let task: Task = taskWith({ last_event_seq: '1' });
    let streams = 0;
    const { code, text } = await run(
      ['watch', TASK_ID, '--after', '1'],
      {
        getTask: () => Promise.resolve({ task }),
        watchTask: () => {
          streams += 1;
          if (streams === 1) return brokenStream();
          task = taskWith({ status: 'TASK_STATUS_SUCCEEDED', last_event_seq: '2' });
          const done = eventWith({ seq: '2', type: 'succeed', to_status: 'TASK_STATUS_SUCCEEDED' });
          return streamOf([done]);
        },
      },
      5_000,
    );
    assert.match(text, /reconnecting after #1/);
    assert.match(text, /succeeded/);
    assert.equal(code, 0);
  });

  it('shows an event whose line failed as the gateway went away once it is back', async () => {
    // The event arrives, the read of the task that completes its line finds the gateway shutting
    // down: the watch resumes before that event, not after it, so its line is not lost.
    const queued = taskWith({ last_event_seq: '1' });
    const done = taskWith({ status: 'TASK_STATUS_SUCCEEDED', last_event_seq: '2' });
    const succeed = eventWith({ seq: '2', type: 'succeed', to_status: 'TASK_STATUS_SUCCEEDED' });
    let reads = 0;
    const { code, text } = await run(
      ['watch', TASK_ID, '--after', '1'],
      {
        getTask: () => {
          reads += 1;
          if (reads === 1) return Promise.resolve({ task: queued });
          if (reads === 2) {
            return Promise.reject(serviceError(grpcStatus.UNAVAILABLE, 'shutting down'));
          }
          return Promise.resolve({ task: done });
        },
        watchTask: (_id, after = 0) => streamOf([succeed].filter((e) => Number(e.seq) > after)),
      },
      5_000,
    );
    assert.match(text, /reconnecting after #1/);
    assert.match(text, /#2 +succeeded +succeed/);
    assert.equal(code, 0);
  });

  it('refuses --after beyond the last event of the task instead of waiting for good', async () => {
    // The gateway streams the events after #5 only; the task's next events (#2 …, its end among
    // them) are not, and the watch waited after the task had finished.
    const { code, text } = await run(['watch', TASK_ID, '--after', '5'], {
      getTask: () => Promise.resolve({ task: taskWith({ last_event_seq: '1' }) }),
      watchTask: (_id, _after, signal) => silentStream(signal),
    });
    assert.equal(code, 2);
    assert.match(text, /--after 5 is past the last event of task \S+ \(#1\)/);
  });

  it('does not wait for good on a gateway that comes back without answering', async () => {
    // The stream breaks (the gateway restarts); what answers at its address afterwards takes the
    // connection and says nothing. A reconnect must not hang on a stream, which has no deadline.
    let reads = 0;
    let streams = 0;
    const { code, text } = await run(['watch', TASK_ID, '--json'], {
      getTask: () => {
        reads += 1;
        return reads === 1
          ? Promise.resolve({ task: taskWith({ last_event_seq: '1' }) })
          : Promise.reject(serviceError(grpcStatus.DEADLINE_EXCEEDED, 'Deadline exceeded'));
      },
      watchTask: (_id, _after, signal) => {
        streams += 1;
        return streams === 1 ? brokenStream() : silentStream(signal);
      },
    });
    assert.match(text, /connection lost/);
    assert.equal(code, 1);
    assert.match(text, /DEADLINE_EXCEEDED/);
  });
});

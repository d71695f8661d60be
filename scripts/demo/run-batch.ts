/**
 * Running the demo batch: submit the tasks one after the other, follow each task's events through
 * `WatchTask` from the moment it exists, and read every task's final state.
 */
import type { Task } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import type { DemoTask } from './batch.js';
import { eventHeader, eventLine, shortId } from './progress.js';
import { submit, type Say, type Submitted } from './scenario.js';

/** What {@link runBatch} needs. */
export interface BatchOptions {
  readonly client: TaskClient;
  readonly batch: readonly DemoTask[];
  /** The absolute URL of a path on the fake web site. */
  readonly urlOf: (path: string) => string;
  readonly say: Say;
  /** Ends the batch early (a signal, a service that died). */
  readonly signal: AbortSignal;
  /** Longest the batch may take, from the first submission to the last final state. */
  readonly deadlineMs: number;
}

/** A task of the batch with its final state (absent when it could not be read). */
export interface BatchResult {
  readonly submitted: Submitted;
  readonly task: Task | undefined;
}

/** What happened to the batch. */
export interface BatchOutcome {
  readonly results: readonly BatchResult[];
  /** Faults while submitting or watching, and a missed deadline. */
  readonly problems: readonly string[];
}

/**
 * Runs the batch until every task has reached a final state, the deadline passes or `signal`
 * aborts, then reads every task's state as it is then.
 */
export async function runBatch(options: BatchOptions): Promise<BatchOutcome> {
  const { client, say } = options;
  const stop = AbortSignal.any([options.signal, AbortSignal.timeout(options.deadlineMs)]);
  const since = performance.now();
  const problems: string[] = [];
  const submitted: Submitted[] = [];
  const follows: Promise<void>[] = [];

  say(eventHeader());
  for (const spec of options.batch) {
    if (stop.aborted) break;
    const task = await submit(client, spec, options.urlOf(spec.sourcePath), since, say);
    submitted.push(task);
    follows.push(
      follow(client, task, since, stop, say).catch((error: unknown) => {
        problems.push(`watching ${shortId(task.taskId)}: ${String(error)}`);
      }),
    );
  }
  await Promise.all(follows);

  if (stop.aborted && !options.signal.aborted) {
    problems.push(`the batch did not finish within ${options.deadlineMs / 1000}s`);
  }
  const results = await Promise.all(
    submitted.map(async (s) => ({
      submitted: s,
      task: await client.getTask(s.taskId).then(
        (response) => response.task,
        (error: unknown) => {
          problems.push(`reading ${shortId(s.taskId)}: ${String(error)}`);
          return undefined;
        },
      ),
    })),
  );
  return { results, problems };
}

/** Prints a task's events as they arrive, until it reaches a final state or `stop` aborts. */
async function follow(
  client: TaskClient,
  submitted: Submitted,
  since: number,
  stop: AbortSignal,
  say: Say,
): Promise<void> {
  try {
    for await (const event of client.watchTask(submitted.taskId, 0, stop)) {
      say(eventLine(since, submitted.spec.priority, event));
    }
  } catch (error) {
    // Aborting cancels the stream, which then ends with an error: expected, unless not aborted.
    if (!stop.aborted) throw error;
  }
}

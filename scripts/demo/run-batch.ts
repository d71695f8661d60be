/**
 * Running the demo batch: submit the tasks one after the other, follow each task's events through
 * `WatchTask` from the moment it exists, and read every task's final state.
 */
import type { Priority, Task, TaskEvent } from '@sluice/api';
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
      followTask({ client, taskId: task.taskId, priority: spec.priority, since, stop, say }).catch(
        (error: unknown) => {
          problems.push(`watching ${shortId(task.taskId)}: ${String(error)}`);
        },
      ),
    );
  }
  await Promise.all(follows);

  if (stop.aborted && !options.signal.aborted) {
    problems.push(`the batch did not finish within ${options.deadlineMs / 1000}s`);
  }
  const tasks = await readTasks(
    client,
    submitted.map((s) => s.taskId),
    problems,
  );
  const results = submitted.map((s, i) => ({ submitted: s, task: tasks[i] }));
  return { results, problems };
}

/** What {@link followTask} needs. */
export interface FollowOptions {
  readonly client: TaskClient;
  readonly taskId: string;
  /** The task's priority, shown on each line. */
  readonly priority: Priority;
  /** The demo's start time (a `performance.now()` value). */
  readonly since: number;
  readonly stop: AbortSignal;
  readonly say: Say;
  /** Called with each event after its line is printed; the next event waits for it. */
  readonly onEvent?: (event: TaskEvent) => Promise<void>;
}

/** Prints a task's events as they arrive, until it reaches a final state or `stop` aborts. */
export async function followTask(options: FollowOptions): Promise<void> {
  const { stop } = options;
  try {
    for await (const event of options.client.watchTask(options.taskId, 0, stop)) {
      options.say(eventLine(options.since, options.priority, event));
      await options.onEvent?.(event);
    }
  } catch (error) {
    // Aborting cancels the stream, which then ends with an error: expected, unless not aborted.
    if (!stop.aborted) throw error;
  }
}

/**
 * Every task's state as it is now, in the order of `taskIds`; `undefined` for a task that could
 * not be read, with the reason added to `problems`.
 */
export async function readTasks(
  client: TaskClient,
  taskIds: readonly string[],
  problems: string[],
): Promise<(Task | undefined)[]> {
  return Promise.all(
    taskIds.map((taskId) =>
      client.getTask(taskId).then(
        (response) => response.task,
        (error: unknown) => {
          problems.push(`reading ${shortId(taskId)}: ${String(error)}`);
          return undefined;
        },
      ),
    ),
  );
}

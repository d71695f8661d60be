/**
 * Running the sample tasks: submit them together, follow each one's events, and when the research
 * report waits for its approval, do what a person would — look at it with `sluice get` and approve
 * it with `sluice approve --comment …`, the real CLI binary — while the others keep running.
 */
import type { Task, TaskEvent } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import { callLine, eventHeader, shortId } from './progress.js';
import { followTask, readTasks } from './run-batch.js';
import type { SampleTask } from './samples.js';
import type { Say } from './scenario.js';
import { runSluice, showRun, type CliConnection } from './sluice-cli.js';

/** What {@link runSamples} needs. */
export interface SamplesOptions {
  readonly client: TaskClient;
  readonly samples: readonly SampleTask[];
  /** How the CLI reaches the gateway, with the same tenant's key. */
  readonly cli: CliConnection;
  readonly say: Say;
  /** Ends the run early (a signal, a service that died). */
  readonly signal: AbortSignal;
  /** Longest the run may take, from the first submission to the last final state. */
  readonly deadlineMs: number;
}

/** A sample task with its final state (absent when it could not be read). */
export interface SampleResult {
  readonly sample: SampleTask;
  readonly taskId: string;
  readonly task: Task | undefined;
}

/** What happened to the samples. */
export interface SamplesOutcome {
  readonly results: readonly SampleResult[];
  /** Faults while submitting, watching or using the CLI, and a missed deadline. */
  readonly problems: readonly string[];
}

/**
 * Submits every sample, then follows them until each has reached a final state, answering the
 * approvals they ask for with the CLI. A failed CLI command ends the run at once (the task would
 * wait for its approval until the deadline otherwise).
 */
export async function runSamples(options: SamplesOptions): Promise<SamplesOutcome> {
  const { client, say } = options;
  const cliFailed = new AbortController();
  const stop = AbortSignal.any([
    options.signal,
    cliFailed.signal,
    AbortSignal.timeout(options.deadlineMs),
  ]);
  const since = performance.now();
  const problems: string[] = [];
  const submitted: { sample: SampleTask; taskId: string }[] = [];
  const follows: Promise<void>[] = [];

  say(eventHeader());
  for (const sample of options.samples) {
    if (stop.aborted) break;
    const { task, created } = await client.createTask({
      type: sample.type,
      priority: sample.priority,
      input: sample.input,
    });
    const taskId = task.task_id;
    if (!created) problems.push(`${shortId(taskId)} ${sample.type}: CreateTask created nothing`);
    say(
      callLine(
        since,
        taskId,
        sample.priority,
        'CreateTask',
        'created',
        `${sample.type}: ${sample.label}`,
      ),
    );
    submitted.push({ sample, taskId });

    const approval = sample.approval;
    const onEvent = approval
      ? async (event: TaskEvent) => {
          if (event.to_status !== 'TASK_STATUS_WAITING_APPROVAL') return;
          const problem = await approveWithCli(options.cli, taskId, approval.comment, {
            since,
            stop,
            say,
          });
          if (problem === undefined) return;
          problems.push(`${shortId(taskId)} ${sample.type}: ${problem}`);
          cliFailed.abort();
        }
      : undefined;
    follows.push(
      followTask({
        client,
        taskId,
        priority: sample.priority,
        since,
        stop,
        say,
        ...(onEvent ? { onEvent } : {}),
      }).catch((error: unknown) => {
        problems.push(`watching ${shortId(taskId)}: ${String(error)}`);
      }),
    );
  }
  await Promise.all(follows);

  if (stop.aborted && !options.signal.aborted && !cliFailed.signal.aborted) {
    problems.push(`the sample tasks did not finish within ${options.deadlineMs / 1000}s`);
  }
  const tasks = await readTasks(
    client,
    submitted.map((s) => s.taskId),
    problems,
  );
  return { results: submitted.map((s, i) => ({ ...s, task: tasks[i] })), problems };
}

/**
 * What a person does with a task waiting for approval: `sluice get <id>` to read the prompt, then
 * `sluice approve <id> --comment <comment>`. Returns what went wrong, if anything.
 */
async function approveWithCli(
  cli: CliConnection,
  taskId: string,
  comment: string,
  { since, stop, say }: { since: number; stop: AbortSignal; say: Say },
): Promise<string | undefined> {
  const get = await runSluice(cli, ['get', taskId], stop);
  showRun(say, get, since);
  if (get.code !== 0) return `sluice get ended with exit ${get.code}`;
  const approve = await runSluice(cli, ['approve', taskId, '--comment', comment], stop);
  showRun(say, approve, since);
  if (approve.code !== 0) return `sluice approve ended with exit ${approve.code}`;
  return undefined;
}

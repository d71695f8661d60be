/**
 * `sluice watch <id> [--after <seq>]`: the task's history, then one line per live event with its
 * state, step, progress and (while queued) estimated wait, until the task finishes. Plain lines,
 * no cursor movement, so the output reads the same in a terminal and in a CI log.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Task, TaskEvent, TaskStatus } from '@sluice/api';
import { isServiceError } from '@sluice/sdk/client';
import { parseCount } from '../arg-values.js';
import { ExitCode, UsageError, type Command, type CommandContext } from '../command.js';
import {
  eventDataDetails,
  isFinal,
  renderWatchEnd,
  renderWatchLine,
  snapshotDetails,
} from '../format.js';

/** How often a task that waits without events (queued) is looked at again for its queue standing. */
export const REFRESH_MS = 5_000;
/** Reconnects of a watch whose stream broke (the gateway restarted); it resumes after the last seq. */
export const MAX_RECONNECTS = 8;
const RECONNECT_BASE_MS = 500;
const RECONNECT_MAX_MS = 5_000;

/** Exit code of a task that reached `status`: 0 succeeded, 1 anything else. */
export function exitCodeOf(status: TaskStatus | number): number {
  return status === 'TASK_STATUS_SUCCEEDED' ? ExitCode.Ok : ExitCode.Failed;
}

/**
 * Runs one function at a time, in call order: event lines and queue refreshes both read the task
 * and print, and must not interleave.
 */
function serializer() {
  let tail: Promise<unknown> = Promise.resolve();
  let pending = 0;
  return {
    get idle() {
      return pending === 0;
    },
    run<T>(fn: () => Promise<T>): Promise<T> {
      pending += 1;
      const result = tail.then(fn).finally(() => (pending -= 1));
      tail = result.catch(() => undefined);
      return result;
    },
  };
}

/** The text lines of a watch: event lines enriched with fresh snapshots, and queue refreshes. */
class HumanWatch {
  private state: TaskStatus | number = 'TASK_STATUS_UNSPECIFIED';
  private lastSeq = '';
  private lastDetails = '';

  constructor(
    private readonly context: CommandContext,
    private readonly taskId: string,
    /** The task before the stream began: events up to its last seq are history. */
    private readonly initial: Task,
    afterSeq: number,
  ) {
    // Starting after the latest event, no event will say the state before the next one does.
    if (afterSeq >= Number(initial.last_event_seq)) {
      this.state = initial.status;
      this.lastSeq = initial.last_event_seq;
    }
  }

  async event(event: TaskEvent): Promise<void> {
    if (event.to_status !== 'TASK_STATUS_UNSPECIFIED') this.state = event.to_status;
    const details = eventDataDetails(event.data);
    const seq = Number(event.seq);
    const initialSeq = Number(this.initial.last_event_seq);
    // History is shown as recorded; a snapshot describes only the newest event. A live event gets
    // a fresh one, used when nothing has happened since (else the next line shows it).
    const snapshot =
      seq === initialSeq
        ? this.initial
        : seq > initialSeq
          ? (await this.context.tasks().getTask(this.taskId)).task
          : undefined;
    if (snapshot && snapshot.last_event_seq === event.seq) {
      this.state = snapshot.status;
      details.push(...snapshotDetails(snapshot, this.context.now(), details));
    }
    this.lastSeq = event.seq;
    this.lastDetails = details.join(' ');
    this.context.output.out(
      renderWatchLine({
        time: event.create_time,
        seq: event.seq,
        state: this.state,
        what: event.type,
        step: event.step,
        details,
      }),
    );
  }

  /** A line when a waiting task's standing changed without an event (queue position, wait). */
  async refresh(): Promise<void> {
    if (this.state !== 'TASK_STATUS_QUEUED') return;
    const { task } = await this.context.tasks().getTask(this.taskId);
    if (task.last_event_seq !== this.lastSeq) return; // An event is on its way; it will say it.
    const details = snapshotDetails(task, this.context.now());
    if (details.join(' ') === this.lastDetails) return;
    this.lastDetails = details.join(' ');
    this.context.output.out(
      renderWatchLine({
        time: this.context.now(),
        state: task.status,
        what: 'waiting',
        step: task.current_step,
        details,
      }),
    );
  }
}

/**
 * Follows a task from after `afterSeq` until it finishes (or Ctrl-C), printing as it goes, and
 * resolves with the exit code: 0 when it succeeded, 1 when it failed or was cancelled, 130 when
 * interrupted. Shared by `watch` and `create --watch`.
 */
export async function followTask(
  context: CommandContext,
  taskId: string,
  afterSeq: number,
): Promise<number> {
  const tasks = context.tasks();
  // The task first, in both modes: a unary call has a deadline and a stream has none, so a gateway
  // that takes the connection but never answers is reported instead of waited on for good.
  const initial = (await tasks.getTask(taskId)).task;
  // The gateway streams only the events after `afterSeq`: from past the task's last one, the events
  // to come up to it (its end among them) would never show, and the watch would wait for good.
  if (afterSeq > Number(initial.last_event_seq)) {
    throw new UsageError(
      `--after ${afterSeq} is past the last event of task ${taskId} (#${initial.last_event_seq})`,
    );
  }
  const human = context.json ? undefined : new HumanWatch(context, taskId, initial, afterSeq);
  const serial = serializer();
  const timer = human
    ? setInterval(() => {
        // A failed refresh is not worth a message: the stream reports real trouble.
        if (serial.idle) void serial.run(() => human.refresh()).catch(() => undefined);
      }, REFRESH_MS)
    : undefined;
  try {
    let lastSeq = afterSeq;
    let reconnects = 0;
    for (;;) {
      try {
        // As at the start: the gateway back at the address must answer (within the call's
        // deadline) before the watch waits on a stream from it, which has no deadline.
        if (reconnects > 0) await tasks.getTask(taskId);
        for await (const event of tasks.watchTask(taskId, lastSeq, context.signal)) {
          reconnects = 0;
          if (human) await serial.run(() => human.event(event));
          else context.output.out(JSON.stringify(event));
          // Only once its line is out: a line that failed (its read of the task found the gateway
          // going away) is shown again after the reconnect instead of skipped.
          lastSeq = Number(event.seq);
        }
        break;
      } catch (error) {
        // The gateway answered the read of the task, so UNAVAILABLE now is a lost connection (a
        // restart), also before the first event: watching from the latest one, none may come for
        // a long while.
        const broken = isServiceError(error) && error.code === grpcStatus.UNAVAILABLE;
        if (!broken || reconnects >= MAX_RECONNECTS) throw error;
        reconnects += 1;
        const waitMs = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** (reconnects - 1));
        context.output.err(
          `watch: connection lost (${error.details}); reconnecting after #${lastSeq} in ${waitMs}ms`,
        );
        await delay(waitMs, undefined, { signal: context.signal }).catch(() => undefined);
      }
      if (context.signal.aborted) break;
    }
  } finally {
    clearInterval(timer);
  }
  if (context.signal.aborted) return ExitCode.Interrupted;
  const { task } = await tasks.getTask(taskId);
  if (human) context.output.out(renderWatchEnd(task));
  if (!isFinal(task.status)) {
    context.output.err(`watch: the stream ended while task ${taskId} is not finished`);
    return ExitCode.Failed;
  }
  return exitCodeOf(task.status);
}

export const watchCommand: Command = {
  name: 'watch',
  args: ['id'],
  options: { after: { type: 'string' } },
  usage: '<id> [--after <seq>]',
  summary: 'follow a task live until it finishes; exit 0 if it succeeded, 1 if not',
  help: [
    "--after <seq>  start after this event sequence, at most the task's last (default 0: the",
    '               whole history first)',
    '--json         one JSON event per line instead of text',
  ],
  async run(context) {
    const [id = ''] = context.args;
    const after = context.option('after');
    return followTask(context, id, after === undefined ? 0 : parseCount(after, '--after', 0));
  },
};

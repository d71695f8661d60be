/**
 * Submitting one task of the demo batch through the API — with its repeat or its cancellation —
 * and judging its final state against what the batch expects.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Task } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import type { DemoTask } from './batch.js';
import { callLine, statusText } from './progress.js';

/** The sample task type the demo runs. */
export const TASK_TYPE = 'research-brief';

/** A task of the batch, once submitted. */
export interface Submitted {
  readonly spec: DemoTask;
  readonly taskId: string;
  /** The cancel was refused because the task had already finished (a race the demo accepts). */
  readonly cancelRefused: boolean;
  /** What went differently from the plan while submitting (empty when all went as expected). */
  readonly problems: readonly string[];
}

/** Where a submission reports what it does: one finished line at a time. */
export type Say = (line: string) => void;

/** The gRPC status code of a failed call, if it is a gRPC error. */
export function grpcCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** `3` → `INVALID_ARGUMENT`. */
export function grpcCodeName(code: number | undefined): string {
  return code === undefined ? 'not a gRPC error' : (GrpcStatus[code] ?? `status ${code}`);
}

/**
 * Creates the task (twice when it has an idempotency key, to show that the repeat returns the same
 * task), then cancels it at once when the batch says so. `since` is the demo's start time.
 */
export async function submit(
  client: TaskClient,
  spec: DemoTask,
  sourceUrl: string,
  since: number,
  say: Say,
): Promise<Submitted> {
  const params = {
    type: TASK_TYPE,
    priority: spec.priority,
    input: { topic: spec.topic, sourceUrl },
    ...(spec.idempotencyKey === undefined ? {} : { idempotencyKey: spec.idempotencyKey }),
  };
  const problems: string[] = [];
  const first = await client.createTask(params);
  const taskId = first.task.task_id;
  say(callLine(since, taskId, spec.priority, 'CreateTask', 'created', spec.label));
  if (!first.created) problems.push('the first CreateTask did not create a task');

  if (spec.idempotencyKey !== undefined) {
    const again = await client.createTask(params);
    const same = again.task.task_id === taskId && !again.created;
    say(
      callLine(
        since,
        again.task.task_id,
        spec.priority,
        'CreateTask',
        same ? 'same task' : 'NEW TASK',
        `repeated with idempotency key ${spec.idempotencyKey}: created=${again.created}`,
      ),
    );
    if (!same) problems.push('the repeated CreateTask did not return the existing task');
  }

  let cancelRefused = false;
  if (spec.cancel) {
    try {
      const { task } = await client.cancelTask(taskId, 'demo: no longer needed');
      const answer = task.cancel_requested
        ? `${statusText(task.status)}, cancel requested`
        : statusText(task.status);
      say(callLine(since, taskId, spec.priority, 'CancelTask', 'accepted', answer));
    } catch (error) {
      // Only a task that already finished refuses a cancel; anything else is a real failure.
      if (grpcCode(error) !== GrpcStatus.FAILED_PRECONDITION) throw error;
      cancelRefused = true;
      say(callLine(since, taskId, spec.priority, 'CancelTask', 'refused', 'it had finished'));
    }
  }
  return { spec, taskId, cancelRefused, problems };
}

/** Why the task's final state is not what the batch expects, or `undefined` when it is. */
export function finalProblem(submitted: Submitted, task: Task): string | undefined {
  // A cancel refused because the task had already succeeded is a lost race, not a fault.
  const expected =
    submitted.spec.cancel && submitted.cancelRefused
      ? 'TASK_STATUS_SUCCEEDED'
      : submitted.spec.expect;
  if (task.status !== expected) {
    return `expected ${statusText(expected)}, ended ${statusText(task.status) || 'unfinished'}`;
  }
  const failsAt = submitted.spec.failsAt;
  if (failsAt !== undefined && task.current_step !== failsAt) {
    return `expected to fail at ${failsAt}, failed at ${task.current_step || 'no step'}`;
  }
  return undefined;
}

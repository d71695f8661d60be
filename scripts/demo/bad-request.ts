/**
 * The demo's one bad request: a `research-brief` whose source is not a URL. The gateway must answer
 * `INVALID_ARGUMENT` naming the field, and create nothing.
 */
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { TaskClient } from '@sluice/sdk/client';
import { grpcCode, grpcCodeName, TASK_TYPE, type Say } from './scenario.js';
import { paint } from '../lib/terminal.js';

/** Sends the bad request and prints the answer; returns what went wrong, if anything. */
export async function showBadRequest(client: TaskClient, say: Say): Promise<string | undefined> {
  const input = { topic: 'a brief without a proper source', sourceUrl: 'not-a-url' };
  say(`CreateTask ${TASK_TYPE} P2 with input ${JSON.stringify(input)}`);
  try {
    const { task } = await client.createTask({ type: TASK_TYPE, priority: 'PRIORITY_P2', input });
    say(paint('red', `  → accepted as task ${task.task_id}: it should have been refused`));
    return 'an invalid input was accepted';
  } catch (error) {
    const code = grpcCode(error);
    const details = (error as { details?: unknown }).details;
    const answer = `${grpcCodeName(code)}: ${typeof details === 'string' ? details : String(error)}`;
    if (code !== GrpcStatus.INVALID_ARGUMENT) {
      say(paint('red', `  → ${answer} (expected INVALID_ARGUMENT)`));
      return `the invalid input was answered ${grpcCodeName(code)}, not INVALID_ARGUMENT`;
    }
    say(`  → ${paint('yellow', answer)}`);
    return undefined;
  }
}

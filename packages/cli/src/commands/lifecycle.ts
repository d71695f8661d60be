/**
 * The lifecycle commands: `cancel`, `approve`, `reject`, `pause`, `resume`, `retry`. Each makes
 * one request and says what it did; the server decides whether the task's state allows it
 * (`FAILED_PRECONDITION` otherwise).
 */
import type { Task } from '@sluice/api';
import type { TaskClient } from '@sluice/sdk/client';
import type { Command, CommandContext } from '../command.js';
import { renderActionResult, type TaskAction } from '../format.js';

interface ActionSpec {
  readonly action: TaskAction;
  readonly summary: string;
  /** The option carrying a text for the server (`--reason`, `--comment`), if any. */
  readonly textOption?: { readonly name: string; readonly help: string };
  call(client: TaskClient, id: string, text: string | undefined): Promise<{ task: Task }>;
}

function lifecycleCommand(spec: ActionSpec): Command {
  const text = spec.textOption;
  return {
    name: spec.action,
    args: ['id'],
    options: text ? { [text.name]: { type: 'string' } } : {},
    usage: text ? `<id> [--${text.name} <text>]` : '<id>',
    summary: spec.summary,
    help: [
      ...(text ? [`--${text.name} <text>  ${text.help}`] : []),
      '--json  the response (the task after the request) as JSON',
    ],
    async run(context: CommandContext) {
      const [id = ''] = context.args;
      const response = await spec.call(
        context.tasks(),
        id,
        text ? context.option(text.name) : undefined,
      );
      context.output.out(
        context.json
          ? JSON.stringify(response, null, 2)
          : renderActionResult(spec.action, response.task),
      );
      return 0;
    },
  };
}

export const lifecycleCommands: readonly Command[] = [
  lifecycleCommand({
    action: 'cancel',
    summary: 'cancel a task (a running one stops once its step is aborted)',
    textOption: { name: 'reason', help: 'why; recorded in the cancel event' },
    call: (client, id, reason) => client.cancelTask(id, reason),
  }),
  lifecycleCommand({
    action: 'approve',
    summary: 'approve a task waiting for approval: it continues',
    textOption: { name: 'comment', help: 'recorded with the decision' },
    call: (client, id, comment) =>
      client.approveTask(id, { approved: true, ...(comment === undefined ? {} : { comment }) }),
  }),
  lifecycleCommand({
    action: 'reject',
    summary: 'reject a task waiting for approval: it is cancelled',
    textOption: { name: 'comment', help: 'the reason of the rejection' },
    call: (client, id, comment) =>
      client.approveTask(id, { approved: false, ...(comment === undefined ? {} : { comment }) }),
  }),
  lifecycleCommand({
    action: 'pause',
    summary: 'pause a task (a running one pauses when its current step ends)',
    call: (client, id) => client.pauseTask(id),
  }),
  lifecycleCommand({
    action: 'resume',
    summary: 'resume a paused task',
    call: (client, id) => client.resumeTask(id),
  }),
  lifecycleCommand({
    action: 'retry',
    summary: 'run a failed or cancelled task again; succeeded steps are kept',
    call: (client, id) => client.retryTask(id),
  }),
];

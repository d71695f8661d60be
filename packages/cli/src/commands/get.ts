/** `sluice get <id>`: a task's state, for people or (`--json`) as the API returns it. */
import type { Command } from '../command.js';
import { renderTask } from '../format.js';

export const getCommand: Command = {
  name: 'get',
  args: ['id'],
  options: {},
  usage: '<id> [--json]',
  summary: 'show a task: state, step, progress, wait, approval, error, what can be done next',
  help: ['--json  the GetTask response as JSON'],
  async run(context) {
    const [id = ''] = context.args;
    const response = await context.tasks().getTask(id);
    context.output.out(
      context.json ? JSON.stringify(response, null, 2) : renderTask(response.task, context.now()),
    );
    return 0;
  },
};

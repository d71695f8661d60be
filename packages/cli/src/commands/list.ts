/**
 * `sluice list [--status s] [--type t] [--priority p] [--limit n | --all]`: the tenant's tasks,
 * newest first, following the API's pages until enough are collected.
 */
import type { ListTasksRequest, Task } from '@sluice/api';
import { parseCount, parsePriority, parseStatus } from '../arg-values.js';
import { UsageError, type Command, type CommandContext } from '../command.js';
import { renderTaskTable } from '../format.js';

/** Tasks shown without `--limit` or `--all`. */
export const DEFAULT_LIMIT = 20;
/** The largest page the gateway serves (larger requests are capped there anyway). */
const MAX_PAGE_SIZE = 500;

/** The filters of the command line as a `ListTasks` request (without paging). */
export function listFilters(context: Pick<CommandContext, 'option'>): Partial<ListTasksRequest> {
  const status = context.option('status');
  const type = context.option('type');
  const priority = context.option('priority');
  return {
    ...(status === undefined ? {} : { status: parseStatus(status) }),
    ...(type === undefined ? {} : { type }),
    ...(priority === undefined ? {} : { priority: parsePriority(priority) }),
  };
}

export const listCommand: Command = {
  name: 'list',
  args: [],
  options: {
    status: { type: 'string' },
    type: { type: 'string' },
    priority: { type: 'string' },
    limit: { type: 'string' },
    all: { type: 'boolean' },
  },
  usage: '[--status <state>] [--type <type>] [--priority P0..P3] [--limit <n> | --all]',
  summary: 'list tasks, newest first',
  help: [
    '--status <state>    only tasks in this state (queued, running, waiting_approval, paused …)',
    '--type <type>       only tasks of this type',
    '--priority P0..P3   only tasks of this priority',
    `--limit <n>         at most n tasks (default ${DEFAULT_LIMIT})`,
    '--all               every matching task',
    '--json              {"tasks": [...], "next_page_token": "..."} as JSON',
  ],
  async run(context) {
    const filters = listFilters(context);
    const limitText = context.option('limit');
    if (limitText !== undefined && context.flag('all')) {
      throw new UsageError('--limit and --all exclude each other');
    }
    const limit = context.flag('all')
      ? Number.POSITIVE_INFINITY
      : limitText === undefined
        ? DEFAULT_LIMIT
        : parseCount(limitText, '--limit', 1);

    const tasks: Task[] = [];
    let pageToken = '';
    do {
      const pageSize = Math.min(MAX_PAGE_SIZE, limit - tasks.length);
      const page = await context
        .tasks()
        .listTasks({ ...filters, page_size: pageSize, page_token: pageToken });
      tasks.push(...page.tasks.slice(0, limit - tasks.length));
      pageToken = page.next_page_token;
    } while (pageToken !== '' && tasks.length < limit);

    if (context.json) {
      context.output.out(JSON.stringify({ tasks, next_page_token: pageToken }, null, 2));
      return 0;
    }
    context.output.out(renderTaskTable(tasks));
    if (pageToken !== '') context.output.err(`(more tasks: raise --limit or pass --all)`);
    return 0;
  },
};

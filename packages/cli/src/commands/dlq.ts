/**
 * `sluice dlq list [--tenant <id>] [--limit <n>] [--page-token <t>]`, `sluice dlq redrive <id…>`,
 * `sluice dlq purge <id…>` (admin key): the dead letters of AdminService.
 */
import type { Command } from '../command.js';
import { parseCount } from '../arg-values.js';
import { renderDeadLetterTable, renderRedriveResults } from '../format.js';

/** The largest `page_size` the API's int32 field carries. */
const MAX_INT32 = 2 ** 31 - 1;

const listLetters: Command = {
  name: 'dlq list',
  args: [],
  options: {
    tenant: { type: 'string' },
    limit: { type: 'string' },
    'page-token': { type: 'string' },
  },
  usage: '[--tenant <id>] [--limit <n>] [--page-token <token>]',
  summary: 'list dead letters, oldest first, with their errors and attempts (admin key)',
  help: [
    "--tenant <id>         only this tenant's letters",
    '--limit <n>           at most n letters (server default 50)',
    '--page-token <token>  continue a previous listing',
    '--json                the ListDeadLetters response as JSON, with each task’s latest events',
  ],
  async run(context) {
    const limit = context.option('limit');
    const response = await context.admin().listDeadLetters({
      tenant_id: context.option('tenant') ?? '',
      // The gateway serves at most its own page size anyway; beyond an int32 the wire would wrap
      // the number (4294967297 to 1, 3000000000 to a negative size).
      page_size: limit === undefined ? 0 : Math.min(MAX_INT32, parseCount(limit, '--limit', 1)),
      page_token: context.option('page-token') ?? '',
    });
    if (context.json) {
      context.output.out(JSON.stringify(response, null, 2));
      return 0;
    }
    context.output.out(renderDeadLetterTable(response.dead_letters));
    if (response.next_page_token !== '') {
      context.output.err(`more: sluice dlq list --page-token ${response.next_page_token}`);
    }
    return 0;
  },
};

const redriveLetters: Command = {
  name: 'dlq redrive',
  args: ['id'],
  variadic: true,
  options: {},
  usage: '<id…>',
  summary: "retry dead letters' tasks from their last succeeded step (admin key)",
  help: [
    'exits with 1 when any letter was not redriven (each says why)',
    '--json  the RedriveDeadLetters response as JSON',
  ],
  async run(context) {
    const response = await context.admin().redriveDeadLetters(context.args);
    context.output.out(
      context.json ? JSON.stringify(response, null, 2) : renderRedriveResults(response.results),
    );
    return response.results.every((r) => r.redriven) ? 0 : 1;
  },
};

const purgeLetters: Command = {
  name: 'dlq purge',
  args: ['id'],
  variadic: true,
  options: {},
  usage: '<id…>',
  summary: 'delete dead letters for good; their tasks are not changed (admin key)',
  help: ['--json  the PurgeDeadLetters response as JSON'],
  async run(context) {
    const response = await context.admin().purgeDeadLetters(context.args);
    if (context.json) {
      context.output.out(JSON.stringify(response, null, 2));
      return 0;
    }
    // The ids are named as requested; a letter named twice in different cases is purged once.
    const purged = new Set(response.purged_ids.map((id) => id.toLowerCase()));
    for (const id of context.args) {
      context.output.out(purged.has(id.toLowerCase()) ? `purged ${id}` : `not found ${id}`);
    }
    return 0;
  },
};

export const deadLetterCommands: readonly Command[] = [listLetters, redriveLetters, purgeLetters];

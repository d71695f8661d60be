/** `sluice tenants create <id> [--name <name>]` and `sluice tenants list` (admin key). */
import type { Tenant } from '@sluice/api';
import type { Command } from '../command.js';
import { renderTenantTable } from '../format.js';

const createTenant: Command = {
  name: 'tenants create',
  args: ['tenant'],
  options: { name: { type: 'string' } },
  usage: '<tenant> [--name <display name>]',
  summary: 'create a tenant (admin key); give it a key with `sluice keys create`',
  help: ['--name <text>  a name for people (default: the tenant id)'],
  async run(context) {
    const [tenantId = ''] = context.args;
    const response = await context.admin().createTenant(tenantId, context.option('name'));
    const { tenant } = response;
    context.output.out(
      context.json
        ? JSON.stringify(response, null, 2)
        : `created tenant ${tenant.tenant_id} (${JSON.stringify(tenant.display_name)}); ` +
            `give it a key: sluice keys create ${tenant.tenant_id}`,
    );
    return 0;
  },
};

const listTenants: Command = {
  name: 'tenants list',
  args: [],
  options: {},
  usage: '',
  summary: 'list every tenant (admin key)',
  help: ['--json  {"tenants": [...]} as JSON'],
  async run(context) {
    const tenants: Tenant[] = [];
    let pageToken = '';
    do {
      const page = await context.admin().listTenants({ page_token: pageToken });
      tenants.push(...page.tenants);
      pageToken = page.next_page_token;
    } while (pageToken !== '');
    context.output.out(
      context.json ? JSON.stringify({ tenants }, null, 2) : renderTenantTable(tenants),
    );
    return 0;
  },
};

export const tenantCommands: readonly Command[] = [createTenant, listTenants];

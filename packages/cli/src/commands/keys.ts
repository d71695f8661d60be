/**
 * `sluice keys create <tenant> [--admin]`, `sluice keys list <tenant>`, `sluice keys revoke <key-id>`
 * (admin key). `keys create` prints only the secret on stdout, so `KEY=$(sluice keys create acme)`
 * works; what it is goes to stderr.
 */
import type { Command } from '../command.js';
import { renderKeyTable } from '../format.js';

const createKey: Command = {
  name: 'keys create',
  args: ['tenant'],
  options: { admin: { type: 'boolean' } },
  usage: '<tenant> [--admin]',
  summary: 'create an API key for a tenant and print its secret, shown only once (admin key)',
  help: ['--admin  an admin key, which may also call the tenants and keys commands'],
  async run(context) {
    const [tenantId = ''] = context.args;
    const response = await context.admin().createApiKey(tenantId, { admin: context.flag('admin') });
    if (context.json) {
      context.output.out(JSON.stringify(response, null, 2));
      return 0;
    }
    const { key } = response;
    context.output.err(
      `created ${key.admin ? 'admin ' : ''}key ${key.key_id} (${key.prefix}…) for tenant ` +
        `${key.tenant_id}; its secret is shown only now:`,
    );
    context.output.out(response.secret);
    return 0;
  },
};

const listKeys: Command = {
  name: 'keys list',
  args: ['tenant'],
  options: {},
  usage: '<tenant>',
  summary: "list a tenant's keys, revoked ones included, without secrets (admin key)",
  help: ['--json  the ListApiKeys response as JSON'],
  async run(context) {
    const [tenantId = ''] = context.args;
    const response = await context.admin().listApiKeys(tenantId);
    context.output.out(
      context.json ? JSON.stringify(response, null, 2) : renderKeyTable(response.keys),
    );
    return 0;
  },
};

const revokeKey: Command = {
  name: 'keys revoke',
  args: ['key-id'],
  options: {},
  usage: '<key-id>',
  summary: 'revoke an API key at once (admin key)',
  help: ['--json  the key after revocation as JSON'],
  async run(context) {
    const [keyId = ''] = context.args;
    const response = await context.admin().revokeApiKey(keyId);
    const { key } = response;
    context.output.out(
      context.json
        ? JSON.stringify(response, null, 2)
        : `revoked key ${key.key_id} (${key.prefix}…) of tenant ${key.tenant_id}`,
    );
    return 0;
  },
};

export const keyCommands: readonly Command[] = [createKey, listKeys, revokeKey];

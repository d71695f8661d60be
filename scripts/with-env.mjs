#!/usr/bin/env node
/**
 * `node scripts/with-env.mjs <command> [args…]`: prepare, then run the command with NATS_URL and
 * DATABASE_URL set and the repository's node_modules/.bin on PATH (as `npm run tenant:create`
 * does). Exits with the command's status.
 */
import { PrepareError, reportError, step } from './lib/log.mjs';
import { runForwardingSignals } from './lib/process.mjs';
import { runPrepared } from './lib/session.mjs';

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  reportError(new PrepareError('usage: node scripts/with-env.mjs <command> [args…]'));
  process.exit(2);
}

await runPrepared({ needTestTools: false }, ({ env, started }) => {
  if (started.length > 0) {
    // Whatever the command writes there is gone afterwards; say so before it runs.
    step(`note: the private ${started.join(' and ')} server(s) go away when the command ends;`);
    step('set NATS_URL / DATABASE_URL to servers that persist to keep what it writes');
  }
  return runForwardingSignals(command, args, { cwd: process.cwd(), env });
});

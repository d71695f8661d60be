#!/usr/bin/env node
/**
 * Gets a clone ready to run: dependencies, the descriptor set, NATS with JetStream and PostgreSQL.
 *
 * Used by `npm test`, `npm run demo`, `npm start` and `scripts/with-env.mjs`, and runnable alone
 * (`node scripts/prepare.mjs [--test-tools]`, which prints the environment and keeps any private
 * servers running until Ctrl-C). Only Node built-ins here: this runs before node_modules exists.
 *
 * Servers are found in this order: NATS_URL / DATABASE_URL when set (which must then work), the
 * local default ports, and otherwise private servers started from the system's binaries (installed
 * with apt-get when missing) that live only as long as the calling script.
 */
import { pathToFileURL } from 'node:url';
import { TERMINATING, exitOnSignals } from './lib/cleanup.mjs';
import { buildDescriptors, installDependencies } from './lib/deps.mjs';
import { reportError, step } from './lib/log.mjs';
import { ensureNats } from './lib/nats.mjs';
import { ensurePostgres } from './lib/postgres.mjs';

/**
 * @typedef {object} Prepared
 * @property {{ NATS_URL: string, DATABASE_URL: string }} env what the services and tests connect to
 * @property {string[]} started the private servers started for this run ("nats", "postgres")
 * @property {() => Promise<void>} stop stops the private servers (only those); safe to call twice
 */

/**
 * @param {{ needTestTools?: boolean }} [options] `needTestTools` also installs the nats-server and
 *   PostgreSQL server binaries when missing, since fault tests start private servers themselves.
 * @returns {Promise<Prepared>}
 */
export async function prepare({ needTestTools = false } = {}) {
  await installDependencies();
  await buildDescriptors();
  const nats = await ensureNats({ needBinary: needTestTools });
  let postgres;
  try {
    postgres = await ensurePostgres({ needBinaries: needTestTools });
  } catch (error) {
    await nats.stop();
    throw error;
  }
  let stopping;
  return {
    env: { NATS_URL: nats.url, DATABASE_URL: postgres.url },
    started: [nats, postgres].filter((s) => s.private).map((s) => s.name),
    stop() {
      stopping ??= Promise.allSettled([postgres.stop(), nats.stop()]).then(() => undefined);
      return stopping;
    },
  };
}

async function main() {
  const restoreSignals = exitOnSignals();
  const prepared = await prepare({ needTestTools: process.argv.includes('--test-tools') });
  restoreSignals();
  for (const [name, value] of Object.entries(prepared.env))
    process.stdout.write(`${name}=${value}\n`);
  if (prepared.started.length === 0) return;
  step(`private ${prepared.started.join(' and ')} running; Ctrl-C stops and removes them`);
  // Every terminating signal stops them, and stays caught until they are stopped: one that killed
  // this process instead (a closed terminal's SIGHUP, a second Ctrl-C) would leave them running,
  // as they are in process groups of their own and `exit` handlers do not run on such a death.
  let stopRequested;
  const requested = new Promise((resolve) => (stopRequested = resolve));
  TERMINATING.forEach((signal) => process.on(signal, stopRequested));
  await requested;
  await prepared.stop();
  TERMINATING.forEach((signal) => process.off(signal, stopRequested));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    reportError(error);
    process.exit(1);
  });
}

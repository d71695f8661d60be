/** Running a TypeScript entry point of the repository (through tsx) with the prepared environment. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { PrepareError, reportError } from './log.mjs';
import { runForwardingSignals } from './process.mjs';
import { repoRoot } from './repo.mjs';
import { runPrepared } from './session.mjs';

/**
 * Prepares, then runs `node --import tsx <entry> <this script's arguments>` in the foreground,
 * passing termination signals on; the process exits with the entry's status.
 * @param {string} entry path relative to the repository root
 * @param {{ needTestTools?: boolean }} options passed to prepare()
 */
export async function runEntry(entry, options) {
  const file = path.join(repoRoot, entry);
  // Checked first: no point installing and starting servers for a program that is not there.
  if (!existsSync(file)) {
    reportError(new PrepareError(`${entry} does not exist yet`));
    process.exitCode = 1;
    return;
  }
  await runPrepared(options, ({ env }) =>
    runForwardingSignals(process.execPath, ['--import', 'tsx', file, ...process.argv.slice(2)], {
      cwd: repoRoot,
      env,
    }),
  );
}

/** Installing missing system binaries with apt-get (Debian/Ubuntu), as the quick start asks. */
import { run, findExecutable } from './process.mjs';
import { PrepareError, step } from './log.mjs';

let updated = false;

/**
 * Installs Debian packages non-interactively. `apt-get update` runs once per process, so a fresh
 * machine with empty package lists works.
 * @param {string[]} packages
 * @param {string} why what the packages are for, shown to the user
 */
export async function aptInstall(packages, why) {
  const list = packages.join(' ');
  if (!findExecutable('apt-get')) {
    throw new PrepareError(
      `${why} needs ${list}, and apt-get is not available; install it yourself`,
    );
  }
  if (process.getuid?.() !== 0) {
    throw new PrepareError(`${why} needs ${list}; install it (sudo apt-get install -y ${list})`);
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!updated) {
    step('apt-get update');
    const update = await run('apt-get', ['update'], { env, quiet: true });
    if (update.code !== 0) throw new PrepareError(`apt-get update failed:\n${update.output}`);
    updated = true;
  }
  step(`apt-get install ${list} (${why})`);
  const install = await run('apt-get', ['install', '-y', '--no-install-recommends', ...packages], {
    env,
    quiet: true,
  });
  if (install.code !== 0)
    throw new PrepareError(`apt-get install ${list} failed:\n${install.output}`);
}

/**
 * The shape shared by `npm test`, `npm run demo`, `npm start` and `with-env`: prepare, do the work
 * with the prepared environment, always stop the private servers, exit with the work's status.
 */
import { prepare } from '../prepare.mjs';
import { exitOnSignals } from './cleanup.mjs';
import { reportError } from './log.mjs';
import { pathWithLocalBin } from './repo.mjs';

const TERMINATING = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * @typedef {object} Session
 * @property {NodeJS.ProcessEnv} env this process's environment plus NATS_URL and DATABASE_URL, with
 *   the root node_modules/.bin on PATH
 * @property {string[]} started the private servers started for this run
 * @property {() => boolean} interrupted whether a termination signal arrived; the running child
 *   already got it (see runForwardingSignals), so the work should just not start another step
 */

/**
 * Runs `work` between preparation and cleanup and sets the process exit code from its result.
 * @param {{ needTestTools?: boolean }} options passed to prepare()
 * @param {(session: Session) => Promise<number>} work resolves with an exit status
 */
export async function runPrepared(options, work) {
  const restoreSignals = exitOnSignals();
  let prepared;
  try {
    prepared = await prepare(options);
  } catch (error) {
    reportError(error);
    process.exitCode = 1;
    return;
  } finally {
    restoreSignals();
  }

  // From here on a signal must not kill us before the private servers are stopped.
  let interrupted = false;
  const onSignal = () => (interrupted = true);
  TERMINATING.forEach((signal) => process.on(signal, onSignal));
  let status = 1;
  try {
    const env = {
      ...process.env,
      ...prepared.env,
      PATH: pathWithLocalBin(process.env.PATH),
    };
    status = await work({ env, started: prepared.started, interrupted: () => interrupted });
  } catch (error) {
    reportError(error);
  } finally {
    await prepared.stop();
    TERMINATING.forEach((signal) => process.off(signal, onSignal));
  }
  process.exitCode = status;
}

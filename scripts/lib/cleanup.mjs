/**
 * Last-resort cleanup of private servers. `stop()` is the normal way to end them; these synchronous
 * actions run from the process `exit` event when the script ends without calling it (an uncaught
 * error, `process.exit` on a signal), so a private server never outlives the script that started
 * it. Only synchronous work is possible there, which is why each action is a plain function.
 */
import { constants } from 'node:os';

const actions = new Set();
let hooked = false;

/**
 * Registers a synchronous action to run at process exit.
 * @param {() => void} action
 * @returns {() => void} unregisters the action (call it once the server was stopped normally)
 */
export function atExit(action) {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const run of actions) {
        try {
          run();
        } catch {
          // Best effort: one failed cleanup must not prevent the others.
        }
      }
    });
  }
  actions.add(action);
  return () => actions.delete(action);
}

/** The signals that end a script (Ctrl-C, `kill`, a closed terminal). */
export const TERMINATING = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * Makes a terminating signal end the process through `process.exit`, so the exit actions above run
 * (by default Node dies on SIGINT without an `exit` event). For the phases where no child is there
 * to hand the signal to, such as while servers are being started.
 * @returns {() => void} restores the previous behaviour
 */
export function exitOnSignals() {
  const onSignal = (signal) => process.exit(128 + constants.signals[signal]);
  TERMINATING.forEach((signal) => process.on(signal, onSignal));
  return () => TERMINATING.forEach((signal) => process.off(signal, onSignal));
}

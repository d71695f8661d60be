/**
 * The process lifecycle shared by every service's `main.ts`: load configuration (exit 2 with one
 * line on a bad value), start, stop cleanly on SIGINT, SIGTERM or SIGHUP (a second signal forces
 * exit), and exit 1 when starting fails.
 */
import { ConfigError } from './config.js';

/** A started service. */
export interface Stoppable {
  stop(): Promise<void>;
}

/** Exit code for invalid configuration. */
export const EXIT_CONFIG = 2;

/**
 * Runs `start` and keeps the process alive until a signal. `start` must not hold the event loop
 * hostage: long-lived work runs on its own connections and timers.
 */
export function runService(name: string, start: () => Promise<Stoppable>): void {
  let service: Stoppable | undefined;
  let stopRequested = false;
  let stopping = false;
  const stopService = (started: Stoppable) => {
    stopping = true;
    started.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`${name}: stop failed: ${describe(error)}\n`);
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopRequested) {
      process.stderr.write(`${name}: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    stopRequested = true;
    // A service still starting is stopped once started: exiting at once would leave what it set up
    // so far (connections, leases, claimed messages) to time out instead of being given back.
    if (service && !stopping) stopService(service);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A closed terminal (an ssh session that drops) hangs up the service run in it: Node's default
  // for SIGHUP ends the process without a clean stop.
  process.on('SIGHUP', onSignal);
  start().then(
    (started) => {
      service = started;
      if (stopRequested) stopService(started);
    },
    (error: unknown) => {
      if (error instanceof ConfigError) {
        process.stderr.write(`${name}: ${error.message}\n`);
        process.exit(EXIT_CONFIG);
      }
      process.stderr.write(`${name}: failed to start: ${describe(error)}\n`);
      process.exit(1);
    },
  );
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

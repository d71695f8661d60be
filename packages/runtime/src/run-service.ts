/**
 * The process lifecycle shared by every service's `main.ts`: load configuration (exit 2 with one
 * line on a bad value), start, stop cleanly on SIGINT/SIGTERM (a second signal forces exit), and
 * exit 1 when starting fails.
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
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      process.stderr.write(`${name}: ${signal} again, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    const stopped = service ? service.stop() : Promise.resolve();
    stopped.then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`${name}: stop failed: ${describe(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  start().then(
    (started) => {
      service = started;
      if (stopping) stop('stop requested during start');
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

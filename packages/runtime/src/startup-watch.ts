/**
 * Says what a starting service is waiting for when its start takes long.
 *
 * Several start-up steps wait without a bound on purpose: the first NATS connect waits for a server
 * that is still starting, the migration waits for the advisory lock another service holds, a
 * JetStream request waits for its answer. A service stuck in one of them used to print nothing at
 * all until it started (a CI run once saw a gateway silent for 60 s, with no way to tell where it
 * was). The watch logs the step it is in every `intervalMs` until the start ends, so an operator
 * (or a test's failure message) can name it.
 */

/** Where the watch writes: a pino logger fits. */
export interface StartupLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Options of {@link watchStartup}. */
export interface StartupWatchOptions {
  /** How long a step may take before it is reported, and how often after that (default 10 s). */
  readonly intervalMs?: number;
  /** The clock, for tests. */
  readonly now?: () => number;
}

/** A running watch over one service's start. */
export interface StartupWatch {
  /** The step the start is in now, e.g. `connecting to NATS`; the clock of the step restarts. */
  stage(name: string): void;
  /** The start ended (started or failed): no more reports. */
  done(): void;
}

/** The default interval of {@link watchStartup}. */
export const DEFAULT_STARTUP_REPORT_MS = 10_000;

/**
 * Starts watching a service's start. A step that lasts `intervalMs` is reported, then again every
 * `intervalMs` while it lasts; each report is a warning naming the step and how long it and the
 * whole start have taken. The timer does not keep the process alive.
 */
export function watchStartup(
  log: StartupLog,
  service: string,
  options: StartupWatchOptions = {},
): StartupWatch {
  const intervalMs = options.intervalMs ?? DEFAULT_STARTUP_REPORT_MS;
  const now = options.now ?? Date.now;
  const startedAt = now();
  let stage = 'starting';
  let stageAt = startedAt;
  let timer: NodeJS.Timeout | undefined;
  const report = (): void => {
    const at = now();
    log.warn(
      { stage, stage_ms: at - stageAt, startup_ms: at - startedAt },
      `${service} is still starting: ${stage}`,
    );
    schedule();
  };
  // Timed from the step's own beginning: a step that just began is not reported as slow.
  const schedule = (): void => {
    clearTimeout(timer);
    timer = setTimeout(report, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    stage(name) {
      stage = name;
      stageAt = now();
      schedule();
    },
    done() {
      clearTimeout(timer);
    },
  };
}

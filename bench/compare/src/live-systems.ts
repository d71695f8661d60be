/**
 * The systems the bench has set up and not yet torn down, so that an interrupted bench (Ctrl-C,
 * SIGTERM) can tear them down before it exits: what a run sets up outlives the bench process (a
 * database, a NATS stream, Redis keys, a private redis-server and its files, child processes).
 */

/** What a run sets up and tears down. */
export interface SetUpSystem {
  setup(): Promise<void>;
  teardown(): Promise<void>;
}

/** One system's setup and teardown, each run once, whoever asks first (the run or an interrupt). */
export interface LiveSystem {
  /** Sets the system up; refused once the bench is stopping. */
  setup(): Promise<void>;
  /** Tears the system down after its setup settled (if it was set up); once, however often called. */
  teardown(): Promise<void>;
}

export class LiveSystems {
  private readonly live = new Set<LiveSystem>();
  private stopping = false;

  /** Whether {@link stop} was called. */
  get stopped(): boolean {
    return this.stopping;
  }

  /** Tracks `system` from its setup until its teardown. */
  track(system: SetUpSystem): LiveSystem {
    let settingUp: Promise<void> | undefined;
    let tearingDown: Promise<void> | undefined;
    const entry: LiveSystem = {
      setup: () => {
        if (this.stopping) return Promise.reject(new Error('the bench is stopping'));
        if (settingUp !== undefined) return settingUp;
        this.live.add(entry);
        settingUp = system.setup();
        return settingUp;
      },
      teardown: () =>
        (tearingDown ??= (async () => {
          if (settingUp === undefined) return; // Never set up (refused): nothing to undo.
          // A setup still under way would set up more after a teardown that ran beside it.
          await settingUp.catch(() => undefined);
          try {
            await system.teardown();
          } finally {
            this.live.delete(entry);
          }
        })()),
    };
    return entry;
  }

  /**
   * Refuses further setups and tears down every system set up now (one whose setup is under way
   * once it has settled); a teardown's failure is passed to `onError` and the others go on.
   */
  async stop(onError: (error: unknown) => void): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.live].map((system) => system.teardown().catch(onError)));
  }
}

/** The bench's systems: runFramed tracks each run's, main.ts stops them on a signal. */
export const liveSystems = new LiveSystems();
